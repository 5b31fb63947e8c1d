"""Grid-world rollout throughput: the batched constrained actor (B envs per LM call) vs one env at a time, same
model, same episodes, side by side. Goal: >= 8x more turns per second batched.

    python benchmarks/gridworld_rollouts.py [--quick] [--model smollm2-135m] [--envs 32] [--dtypes float32,bfloat16]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, report, timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer episodes (< 1 min)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--envs", type=int, default=32)
    parser.add_argument("--dtypes", default="float32,bfloat16",
                        help="weight dtypes to measure, each with the same model on both sides (bfloat16 pays off "
                             "on CPUs with AMX / AVX512-BF16 and on GPUs)")
    args = parser.parse_args()

    from ad.pretrained import load_base
    from tasks.gridworld.actor import LMActor
    from tasks.gridworld.env import split_configs
    from tasks.gridworld.rollouts import Rewards, run_episodes

    episodes = args.envs if not args.quick else min(args.envs, 16)
    starts = split_configs(4, 0.2, 0)[0][:episodes]
    rewards = Rewards(size=4)
    figures = []
    for dtype in args.dtypes.split(","):
        model, tok = load_base(args.model, dtype)
        actor = LMActor(model, tok, max_moves=4)
        run_episodes(actor, rewards, starts[:2], 1, greedy=True)  # warm-up
        t_batch, ep_b = timed(lambda: run_episodes(actor, rewards, starts, 6, greedy=True, batch=episodes))
        t_single, ep_s = timed(lambda: run_episodes(actor, rewards, starts, 6, greedy=True, batch=1))
        turns_b, turns_s = len(ep_b.rows["reward"]), len(ep_s.rows["reward"])
        agree = sorted(ep_b.outcomes) == sorted(ep_s.outcomes)
        print(f"{dtype}: batched: {turns_b} turns in {t_batch:.2f}s; one env at a time: {turns_s} turns in "
              f"{t_single:.2f}s; greedy outcomes agree: {agree}")
        figures.append(figure(f"rollout throughput, {episodes} envs batched vs one at a time ({dtype} weights)",
                              "turns/s", turns_b / t_batch, turns_s / t_single, ">= 8x"))
    report("gridworld_rollouts", figures, args.quick)


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
