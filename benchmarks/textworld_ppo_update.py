"""Cost of one PPO iteration's update (reference terms + one epoch) with ``--ppo-ratio valid-commands`` (every valid
command rescored, exact KL over them) against ``command-tokens`` (the chosen command's tokens only), on the same
sampled moves of the same model, windowed and transcript prompts; the sides alternate, each from the same fresh
adapter and optimiser.

    python benchmarks/textworld_ppo_update.py [--games 4] [--moves 6] [--repeats 1] [--threads 2]
    python benchmarks/textworld_ppo_update.py --quick     # tiny random LM, 2 games, 3 moves

Results: benchmarks/results/textworld_ppo_update.json.
"""
from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.common import figure, report  # noqa: E402
from tasks.textworld.ppo_moves import RATIOS  # noqa: E402


def update_seconds(model: Any, tokenizer: Any, episodes: Any, ratio: str, transcript: bool) -> tuple[float, dict]:
    """Seconds of collect_moves + one update epoch from the model's current adapter (restored afterwards)."""
    import torch

    from tasks.textworld.ppo import PPOLearner
    from tasks.textworld.ppo_moves import collect_moves

    state = copy.deepcopy({n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad})
    torch.manual_seed(0)  # the same fresh value head on both sides
    head = torch.nn.Linear(model.get_base_model().config.hidden_size, 1)
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    learner = PPOLearner(model, head, lr=3e-5, clip=0.2, value_clip=0.2, vf_coef=0.5, kl_coef=0.05, epochs=1,
                         batch_size=16, pad_id=pad, seed=0)
    start = time.perf_counter()
    moves = collect_moves(episodes, model, 0.99, 0.95, pad, batch=16, transcript=transcript, ratio=ratio)
    stats = learner.update(moves)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.requires_grad:
                p.copy_(state[n])
    return seconds, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="policy LM (as ad generate textworld --model)")
    parser.add_argument("--games", type=int, default=4, help="games sampled (one batch)")
    parser.add_argument("--moves", type=int, default=6, help="step limit of each game")
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs of each side (median taken)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="tiny random LM, 2 games, 3 moves")
    args = parser.parse_args()
    import torch
    from peft import get_peft_model

    from ad.config.groups import peft_lora_config
    from ad.lm.pretrained import load_base
    from tasks.textworld.games import GameOptions
    from tasks.textworld.policy import TextWorldPolicy
    from tasks.textworld.rollouts import fold_games, play

    torch.set_num_threads(args.threads)
    games, moves, model_name = (2, 3, None) if args.quick else (args.games, args.moves, args.model)
    if model_name is None:
        from benchmarks.helpers.tiny_lm import build_tiny

        model_name = str(build_tiny(Path(tempfile.mkdtemp()) / "tiny", width=32, max_positions=16384))
    base, tokenizer = load_base(model_name, dtype="float32")
    model = get_peft_model(base, peft_lora_config({"lora_r": 8, "lora_alpha": 16.0, "lora_dropout": 0.0,
                                                   "target_modules": ["all-linear"]}))
    options = GameOptions(step_limit=moves)
    chosen = fold_games(options, "train", games, 0)
    figures = []
    for prompt, transcript in (("windowed", False), ("transcript", True)):
        policy = TextWorldPolicy(model, tokenizer, None, 256 * max(moves, 32) if transcript else 512,
                                 transcript=transcript)
        episodes = play(policy, chosen, options, moves if transcript else 1, greedy=False,
                        generator=torch.Generator().manual_seed(0), pinned=[] if transcript else ["read cookbook"])
        for e in episodes:
            e.values = [0.0] * len(e)  # no value head while playing: values start at 0, as a fresh head's
        n = sum(len(e) for e in episodes)
        seconds: dict[str, list[float]] = {r: [] for r in RATIOS}
        for rep in range(args.repeats):
            for ratio in RATIOS if rep % 2 == 0 else RATIOS[::-1]:
                s, stats = update_seconds(model, tokenizer, episodes, ratio, transcript)
                seconds[ratio].append(s)
                print(f"{prompt} {ratio}: {s:.1f} s for {n} moves; " +
                      ", ".join(f"{k} {v:.3g}" for k, v in stats.items()), flush=True)
        figures.append(figure(f"PPO update throughput, {prompt} prompts: valid-commands / command-tokens ratio "
                              f"(reference terms + 1 epoch, {n} sampled moves of {games} games x {moves} moves, "
                              f"{Path(model_name).name}, float32, {args.threads} threads, median of {args.repeats})",
                              "moves/s", n / float(np.median(seconds["valid-commands"])),
                              n / float(np.median(seconds["command-tokens"])),
                              "the price of training the acting distribution (report)"))
    report("textworld_ppo_update", figures, args.quick, page="textworld")


if __name__ == "__main__":
    main()
