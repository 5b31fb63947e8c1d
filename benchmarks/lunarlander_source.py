"""LunarLander source speed: the batched PPO of ``ad generate lunarlander`` (every task's learner in one forward /
backward, one vector env over all tasks) vs Stable-Baselines3 PPO one task at a time (``ad generate gym --env
LunarLander-v3 --algo sb3:PPO``), env steps/s over all tasks, both recording every transition; and how fast the
batched source's returns rise: the episode at which each task's running return (mean of its streams' last 20
episodes) passes 0, 100 and 200.

    python benchmarks/lunarlander_source.py --config configs/lunarlander/source.yaml
    python benchmarks/lunarlander_source.py --quick    # 2 tasks, 2048 steps each, under a minute
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402
from benchmarks.lunarlander_common import THRESHOLDS, return_milestones  # noqa: E402


def run_batched(out: Path, args: Any) -> dict[str, Any]:
    """``ad generate lunarlander`` on ``args.tasks`` tasks; returns its summary."""
    from ad.config import make_config
    from tasks.lunarlander.config import GenerateConfig
    from tasks.lunarlander.generate import generate

    cfg = make_config(GenerateConfig, {"out": str(out), "tasks": args.tasks, "steps": args.steps,
                                       "streams": args.streams, "seed": args.seed, "progress": False})
    summary = generate(cfg)
    summary["env_steps"] = args.tasks * cfg.updates * cfg.streams * cfg.rollout
    return summary


def run_sb3(work: Path, args: Any) -> dict[str, Any]:
    """``ad generate gym --env LunarLander-v3 --algo sb3:PPO`` on the first ``args.sb3_tasks`` of the same tasks."""
    from ad.config import make_config
    from tasks.gym.config import GymGenerateConfig
    from tasks.gym.generate import generate
    from tasks.lunarlander.config import GenerateConfig
    from tasks.lunarlander.generate import task_kwargs

    kwargs = task_kwargs(make_config(GenerateConfig, {"tasks": args.sb3_tasks, "seed": args.seed}))
    tasks_file = work / "tasks.json"
    tasks_file.write_text(json.dumps({"tasks": kwargs, "reference_return": 200}))
    cfg = make_config(GymGenerateConfig, {"env": "LunarLander-v3", "tasks": str(tasks_file), "algo": "sb3:PPO",
                                          "steps": args.sb3_steps, "out": str(work / "sb3"), "seed": args.seed,
                                          "progress": False})
    summary = generate(cfg)
    summary["env_steps"] = args.sb3_tasks * args.sb3_steps
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 tasks, 2048 steps each; SB3 on 1 task")
    parser.add_argument("--tasks", type=int, default=16, help="tasks of the batched source")
    parser.add_argument("--steps", type=int, default=300_000, help="env steps per task of the batched source")
    parser.add_argument("--streams", type=int, default=4, help="envs per task of the batched source")
    parser.add_argument("--sb3-tasks", type=int, default=2, help="tasks SB3 PPO learns, one after the other")
    parser.add_argument("--sb3-steps", type=int, default=50_000, help="env steps per task of SB3 PPO")
    parser.add_argument("--seed", type=int, default=0, help="seed of the task draws and the learners")
    args = parse_args(parser)
    if args.quick:
        args.tasks, args.steps, args.sb3_tasks, args.sb3_steps = 2, 2048, 1, 2048
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_batched(Path(tmp) / "batched", args)
        milestones = return_milestones(Path(tmp) / "batched")
        ref = run_sb3(Path(tmp), args)
    ours_rate, ref_rate = ours["env_steps"] / ours["seconds"], ref["env_steps"] / ref["seconds"]
    figures = [figure(f"LunarLander source env steps/s, all tasks, recorded: batched PPO over {args.tasks} tasks x "
                      f"{args.streams} envs vs SB3 PPO one task at a time", "steps/s", ours_rate, ref_rate,
                      "> 1 (faster than SB3 one task at a time)")]
    for t in THRESHOLDS:
        passed = sorted(m[f"{t:g}"] for m in milestones.values() if m[f"{t:g}"] is not None)
        median = float(passed[len(passed) // 2]) if passed else None  # no task passed: null in the JSON
        row = figure(f"LunarLander batched PPO, {args.steps} steps per task: median episode at which a task's running "
                     f"return passes {t:g} ({len(passed)} of {len(milestones)} tasks pass)", "episode", median, None,
                     "-", higher_is_better=False)
        row["per_task"] = {task: m[f"{t:g}"] for task, m in milestones.items()}
        figures.append(row)
    figures[-1]["final_running_return"] = {task: m["final_running_return"] for task, m in milestones.items()}
    report("lunarlander_source", figures, args.quick, capability="LunarLander source (batched PPO)",
           page="continuous", config=None if args.quick else "configs/lunarlander/source.yaml")


if __name__ == "__main__":
    main()
