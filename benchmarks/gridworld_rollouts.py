"""Grid-world rollout throughput: the batched constrained actor (B envs per LM call) vs one env at a time, same
model, same episodes, side by side. Goal: >= 8x more turns per second batched.

    python benchmarks/gridworld_rollouts.py [--quick] [--model smollm2-135m] [--envs 32] [--episodes 128]
                                            [--dtypes float32,bfloat16] [--state-text egocentric]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, lm_parser, parse_args, report, timed  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = lm_parser(__doc__, "fewer episodes (< 1 min)")
    parser.add_argument("--envs", type=int, default=32, help="env slots of the batched actor")
    parser.add_argument("--episodes", type=int, default=0, help="episodes played by both sides (default 4 x envs; "
                        "a batched slot whose episode ends starts the next one)")
    parser.add_argument("--dtypes", default="float32,bfloat16",
                        help="weight dtypes to measure, each with the same model on both sides (bfloat16 pays off "
                             "on CPUs with AMX / AVX512-BF16 and on GPUs)")
    parser.add_argument("--state-text", default="egocentric",
                        help="state text of the prompts (ad generate gridworld's default)")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402


def main(args: argparse.Namespace) -> None:
    from ad.lm.pretrained import load_base
    from tasks.gridworld.actor import LMActor
    from tasks.gridworld.env import split_configs
    from tasks.gridworld.rollouts import Rewards, run_episodes

    envs = args.envs if not args.quick else min(args.envs, 16)
    episodes = args.episodes or 4 * envs
    train = split_configs(4, 0.2, 0)[0]
    starts = [train[i] for i in np.random.default_rng(0).choice(len(train), episodes, replace=False)]
    rewards = Rewards(size=4, state_text=args.state_text)
    figures = []
    for dtype in args.dtypes.split(","):
        model, tok = load_base(args.model, dtype)
        actor = LMActor(model, tok, max_moves=4)
        run_episodes(actor, rewards, starts[:2], 1, greedy=True)  # warm-up
        t_batch, ep_b = timed(lambda: run_episodes(actor, rewards, starts, 6, greedy=True, batch=envs))
        t_single, ep_s = timed(lambda: run_episodes(actor, rewards, starts, 6, greedy=True, batch=1))
        turns_b, turns_s = len(ep_b.rows["reward"]), len(ep_s.rows["reward"])
        agree = sorted(ep_b.outcomes) == sorted(ep_s.outcomes)
        print(f"{dtype}: batched: {turns_b} turns in {t_batch:.2f}s; one env at a time: {turns_s} turns in "
              f"{t_single:.2f}s; greedy outcomes agree: {agree}")
        figures.append(figure(f"rollout throughput, {episodes} episodes in {envs} batched env slots vs one env at a "
                              f"time ({dtype} weights, {args.state_text} state text)",
                              "turns/s", turns_b / t_batch, turns_s / t_single, ">= 8x"))
    report("gridworld_rollouts", figures, args.quick, page="gridworld")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main(ARGS)
