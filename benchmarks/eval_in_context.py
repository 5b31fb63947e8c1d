"""In-context evaluation speed: ours (all held-out goals in one vectorised env, one KV cache) vs the reference loop
public AD code uses (one goal at a time, a full forward over the last window every step). Same model, same goals,
greedy actions (checked identical), env steps per second.

    python benchmarks/eval_in_context.py [--ckpt runs/ad] [--episodes 100]
    python benchmarks/eval_in_context.py --quick
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report, timed  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=None, help="run folder of `ad train rl` (default: the demo-size model, "
                                                     "randomly initialised: speed does not depend on the weights)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--goals", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=3, help="evaluation seeds per goal (as `ad eval` runs them)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="10 episodes, 8 goals")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402
from ad.evaluate import run_in_context  # noqa: E402
from models.rl.config import ADConfig  # noqa: E402
from models.rl.model import ADTransformer  # noqa: E402
from models.rl.policy import ADPolicy  # noqa: E402
from benchmarks.helpers.references import ADPolicyReference  # noqa: E402
from ad.registry import env_factory  # noqa: E402
from tasks.darkroom.goals import all_goals, task_name  # noqa: E402
from tasks.grid.room import split_goals  # noqa: E402


META = {"task_spec": {"size": 9, "episode_length": 20, "random_start": False, "terminate_on_goal": False}}


class Recorder:
    """Wraps a policy and records the actions it picks."""

    def __init__(self, policy):
        self.policy, self.actions = policy, []

    def reset(self, num_envs):
        self.actions = []
        self.policy.reset(num_envs)

    def act(self, *args):
        actions = self.policy.act(*args)
        self.actions.append(np.asarray(actions))
        return actions


def main(args: argparse.Namespace) -> None:
    if args.quick:
        args.episodes, args.goals, args.seeds = 10, 8, 1
    torch.set_num_threads(args.threads)
    if args.ckpt:
        model = ADTransformer.from_pretrained(Path(args.ckpt) / "model")
    else:
        torch.manual_seed(0)
        model = ADTransformer(ADConfig(num_states=81, num_actions=5, episode_length=20, grid_size=9,
                                       position_embedding=True))
    _, heldout = split_goals(all_goals(9), 0.25, 0)
    tasks = [task_name(9, g) for g in heldout[: args.goals]]
    steps = args.episodes * 20 * len(tasks) * args.seeds

    ours = Recorder(ADPolicy(model, greedy=True))
    t_ours, _ = timed(lambda: run_in_context(ours, env_factory("darkroom")(META, tasks, args.seeds), args.episodes,
                                             progress=False))
    ours_actions = np.stack(ours.actions)  # (steps, goals * seeds), goal-major

    ref_actions = []

    def reference():
        for task in tasks:
            for seed in range(args.seeds):
                rec = Recorder(ADPolicyReference(model, greedy=True))
                run_in_context(rec, env_factory("darkroom")(META, [task], 1), args.episodes, seed=seed, progress=False)
                ref_actions.append(np.concatenate(rec.actions))

    t_ref, _ = timed(reference)
    same = float((np.stack(ref_actions, axis=1) == ours_actions).mean())
    print(f"{len(tasks)} goals x {args.seeds} seeds x {args.episodes} episodes: ours {t_ours:.1f} s, reference {t_ref:.1f} s, "
          f"identical greedy actions: {same:.4f}")
    figures = [
        figure(f"in-context evaluation, {len(tasks)} goals x {args.seeds} seeds x {args.episodes} episodes (batched + "
               "KV cache vs one env at a time, full window forward)", "env steps/s", steps / t_ours, steps / t_ref, ">= 20x"),
        figure("greedy actions identical to the reference", "fraction", same, None, "1.0"),
    ]
    report("eval_in_context", figures, args.quick, page="models-and-evaluation")


if __name__ == "__main__":
    main(ARGS)
