"""TextWorld (CookingWorld) figures: env throughput of our Gymnasium wrapper vs raw TextWorldExpress, acting
throughput of the batched valid-command scorer (many games in one batch vs one game at a time, same model), and
the held-out / train-fold success and normalised score of the base LM, after SFT and after PPO (``ad generate
textworld``'s own evaluation, per seed).

    python benchmarks/textworld.py [--parts env acting learning] [--seeds 0 1] [--out data/bench-textworld]
    python benchmarks/textworld.py --quick     # small version of every part, well under a minute with a tiny LM

Timings are taken on a CPU shared with other jobs (recorded as ``load`` in the JSON); each ratio is measured side
by side in one run, the two sides interleaved. Results: benchmarks/results/textworld.json (+ textworld.png).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, report  # noqa: E402

LOAD_NOTE = "CPU shared with other agents' jobs (timings under load; the ratio is measured side by side)"


def _play(reset, step, seeds: list[int], steps: int, rng_seed: int) -> int:
    """Random valid commands (same draws for both sides) in each game; returns moves made."""
    rng = np.random.default_rng(abs(rng_seed) + (rng_seed < 0) * 1000)
    moves = 0
    for s in seeds:
        valid = reset(s)
        for _ in range(steps):
            valid, done = step(sorted(valid)[rng.integers(len(valid))])
            moves += 1
            if done:
                break
    return moves


def env_throughput(games: int, steps: int, repeats: int) -> dict[str, Any]:
    """Moves per second of CookingWorldEnv vs TextWorldExpressEnv on the same games and commands."""
    from textworld_express import TextWorldExpressEnv

    from tasks.textworld.env import CookingWorldEnv
    from tasks.textworld.games import GameOptions

    ours = CookingWorldEnv(fold="train", step_limit=steps)
    raw = TextWorldExpressEnv(envStepLimit=steps)
    raw.load("cookingworld", GameOptions().game_params())
    seeds = ours.fold_seeds[:games].tolist()

    def ours_reset(s):
        return ours.reset(options={"game_seed": s})[1]["valid_actions"]

    def ours_step(a):
        _, _, term, trunc, info = ours.step(a)
        return info["valid_actions"], term or trunc

    def raw_reset(s):
        return raw.reset(seed=s, gameFold="train")[1]["validActions"]

    def raw_step(a):
        _, _, done, info = raw.step(a)
        return info["validActions"], done

    rates = {"ours": [], "raw": []}
    _play(ours_reset, ours_step, seeds, steps, -1), _play(raw_reset, raw_step, seeds, steps, -1)  # JIT warm-up
    for r in range(repeats):  # interleaved: both sides see the same load
        for name, (reset, step) in (("ours", (ours_reset, ours_step)), ("raw", (raw_reset, raw_step))):
            start = time.perf_counter()
            moves = _play(reset, step, seeds, steps, r)
            rates[name].append(moves / (time.perf_counter() - start))
    raw.close()
    return {k: float(np.median(v)) for k, v in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["env"], choices=["env"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="generate seeds (held-out game draws)")
    parser.add_argument("--out", default="data/bench-textworld", help="work folder (one dataset per seed)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="a small version of the same work")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    figures: list[dict[str, Any]] = []
    if "env" in args.parts:
        games, steps, repeats = (10, 16, 2) if args.quick else (100, 16, 5)
        env = env_throughput(games, steps, repeats)
        fig = figure(f"env throughput: our Gymnasium wrapper / raw TextWorldExpressEnv ({games} CookingWorld games, "
                     f"random valid commands, <= {steps} moves, median of {repeats} interleaved repeats)",
                     "moves/s", env["ours"], env["raw"], ">= 0.8x")
        fig["load"] = LOAD_NOTE
        figures.append(fig)
    report("textworld", figures, args.quick)


if __name__ == "__main__":
    main()
