"""Transcript acting with the cache's padding columns dropped (``TranscriptScorer.compact_at``, default 1.25) vs
kept (0): moves/s of greedy play on the same games with the same model, the longest cache reached, and whether
both sides chose the same commands. Each move left-pads the games' new tokens to the batch's longest, so a cache
that keeps its padding grows by the longest each move and every new token attends over all of it.

    python benchmarks/textworld_transcript_cache.py [--games 16] [--moves 24] [--adapter SFT_ADAPTER_FOLDER]
    python benchmarks/textworld_transcript_cache.py --quick     # tiny random LM, 4 games, 4 moves

Results: benchmarks/results/textworld_transcript_cache.json.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.common import figure, report  # noqa: E402

SIDES = {"compacted": 1.25, "padded": 0.0}


def play_side(policy: Any, compact_at: float, games: Any, options: Any, moves: int) -> tuple[float, int, list]:
    """(moves/s, longest cache in columns, each game's commands) of one greedy play."""
    from tasks.textworld.rollouts import play

    scorer = policy.transcript
    scorer.compact_at = compact_at
    longest = [0]
    score = scorer.score

    def tracked(*args: Any, **kwargs: Any) -> Any:  # the cache's length after each move
        out = score(*args, **kwargs)
        longest[0] = max(longest[0], int(scorer.mask.shape[1]))
        return out

    scorer.score = tracked
    try:
        start = time.perf_counter()
        episodes = play(policy, games, options, moves)
        seconds = time.perf_counter() - start
    finally:
        del scorer.score  # back to the method
    return sum(len(e) for e in episodes) / seconds, longest[0], [e.actions for e in episodes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="policy LM (as ad generate textworld --model)")
    parser.add_argument("--adapter", help="a LoRA adapter folder to merge first (e.g. a run's _run/sft-adapter)")
    parser.add_argument("--games", type=int, default=16, help="held-out games played in one batch")
    parser.add_argument("--moves", type=int, default=24, help="step limit")
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs of each side (median taken)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--quick", action="store_true", help="tiny random LM, 4 games, 4 moves")
    args = parser.parse_args()
    import torch

    from ad.pretrained import load_base
    from tasks.textworld.games import GameOptions
    from tasks.textworld.policy import TextWorldPolicy
    from tasks.textworld.rollouts import fold_games

    torch.set_num_threads(args.threads)
    games, moves, model_name = (4, 4, None) if args.quick else (args.games, args.moves, args.model)
    if model_name is None:
        from models.lm.tiny import build_tiny

        model_name = str(build_tiny(Path(tempfile.mkdtemp()) / "tiny", width=32, max_positions=16384))
    model, tokenizer = load_base(model_name, dtype=args.dtype)
    if args.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, args.adapter).merge_and_unload()
    if torch.cuda.is_available():
        model = model.cuda()
    model.eval()
    options = GameOptions(step_limit=moves)
    chosen = fold_games(options, "test", games, 0)
    policy = TextWorldPolicy(model, tokenizer, max_prompt_tokens=256 * max(moves, 32), batch=games, transcript=True)
    rates: dict[str, list[float]] = {name: [] for name in SIDES}
    longest: dict[str, int] = {}
    actions: dict[str, list] = {}
    for rep in range(args.repeats):
        for name in SIDES if rep % 2 == 0 else list(SIDES)[::-1]:
            rate, longest[name], actions[name] = play_side(policy, SIDES[name], chosen, options, moves)
            rates[name].append(rate)
            print(f"{name}: {rate:.3f} moves/s, longest cache {longest[name]} columns", flush=True)
    same = actions["compacted"] == actions["padded"]
    label = Path(model_name).name + (f" + {Path(args.adapter).name}" if args.adapter else "")
    fig = figure(f"transcript acting, cache padding dropped / kept ({games} held-out games in one batch, {moves} "
                 f"moves, greedy, {label}, {args.dtype}, {args.threads} threads, median of {args.repeats}; longest "
                 f"cache {longest['compacted']} vs {longest['padded']} columns; same commands: {same})", "moves/s",
                 float(np.median(rates["compacted"])), float(np.median(rates["padded"])), "faster, same commands")
    report("textworld_transcript_cache", [fig], args.quick)


if __name__ == "__main__":
    main()
