"""How far the LunarLander source learns at a fixed budget under two sets of PPO settings, side by side: the
source's defaults (``ad generate lunarlander``) and the RL Baselines3 Zoo's LunarLander PPO settings (minibatches of
64, so 4x the optimiser steps per sample; gamma 0.999, GAE lambda 0.98, learning rate 3e-4), on the same tasks
and seeds. Per task: the episode at which its running return (mean over its streams of the last 20 episodes) passes
0, 100 and 200, and its final running return.

    python benchmarks/lunarlander_source_settings.py --config configs/lunarlander/source_settings.yaml
    python benchmarks/lunarlander_source_settings.py --quick    # 1 task, 4096 steps, under a minute
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, merge_report, parse_args  # noqa: E402
from benchmarks.lunarlander_common import THRESHOLDS, return_milestones, running_returns  # noqa: E402

#: `ad generate lunarlander` options of each setting (the rest: the command's defaults)
SETTINGS = {
    "defaults": {},
    "rl-zoo": {"minibatches": 16, "gamma": 0.999, "gae_lambda": 0.98, "learning_rate": 3e-4},
}
TITLES = {"defaults": "the defaults", "rl-zoo": "RL Zoo PPO settings"}


def generate_all(work: Path, runs: list[tuple[str, int]], args: Any) -> None:
    """``ad generate lunarlander`` of every (setting, seed), ``args.parallel`` processes at a time (a finished
    dataset is resumed, that is read back)."""
    pending = list(runs)
    active: list[subprocess.Popen] = []
    while pending or active:
        while pending and len(active) < args.parallel:
            name, seed = pending.pop(0)
            flags = [f"--{k.replace('_', '-')}={v}" for k, v in SETTINGS[name].items()]
            command = [sys.executable, "-m", "ad", "generate", "lunarlander", "--tasks", str(args.tasks), "--steps",
                       str(args.steps), "--seed", str(seed), "--progress", "false",
                       "--out", str(work / f"{name}-seed{seed}"), *flags]
            print(" ".join(command[1:]), flush=True)
            active.append(subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"}))  # one core each
        active[0].wait()
        if active[0].returncode != 0:
            raise SystemExit(f"{' '.join(active[0].args[1:])} failed with exit code {active[0].returncode}")
        active.pop(0)


def plot(curves: dict[tuple[str, int], dict[str, np.ndarray]], seeds: list[int], path: Path) -> Path:
    """Every task's running return per episode, one panel per seed, one colour per setting."""
    from ad.plots import pyplot, save_figure

    fig, axes = pyplot().subplots(1, len(seeds), figsize=(5.5 * len(seeds), 3.8), squeeze=False)
    for ax, seed in zip(axes[0], seeds):
        for colour, name in zip(("tab:blue", "tab:orange"), SETTINGS):
            for i, curve in enumerate(curves.get((name, seed), {}).values()):
                ax.plot(np.arange(1, len(curve) + 1), curve, color=colour, lw=1, label=name if i == 0 else None)
        ax.axhline(200, color="grey", lw=0.8, ls=":")
        ax.set(xlabel="episode (of each stream)", ylabel="running return", title=f"seed {seed}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 task, 4096 steps, one seed")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per seed (each seed draws its own)")
    parser.add_argument("--steps", type=int, default=300_000, help="env steps per task")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds (different tasks and learners)")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS),
                        help="settings to run (the figures compare RL Zoo's with the defaults where both run)")
    parser.add_argument("--parallel", type=int, default=2, help="generations run at once (one thread each)")
    parser.add_argument("--work", default="data/bench-lunarlander-source-settings", help="folder of the datasets")
    args = parse_args(parser)
    if args.quick:
        args.tasks, args.steps, args.seeds, args.work = 1, 4096, args.seeds[:1], args.work + "-quick"
    args.settings = [name for name in SETTINGS if name in args.settings]  # one order, whatever the command line's
    work = Path(args.work)
    runs = [(name, seed) for seed in args.seeds for name in args.settings]
    generate_all(work, runs, args)
    milestones = {run: return_milestones(work / f"{run[0]}-seed{run[1]}") for run in runs}
    curves = {run: running_returns(work / f"{run[0]}-seed{run[1]}") for run in runs}
    figures = []
    for t in THRESHOLDS:
        passed = {run: sum(m[f"{t:g}"] is not None for m in milestones[run].values()) for run in runs}
        count = {name: sum(passed[(name, s)] for s in args.seeds) if name in args.settings else None
                 for name in SETTINGS}
        row = figure(f"LunarLander source, {args.steps} steps per task, {args.tasks} tasks x seeds {args.seeds}: tasks "
                     f"whose running return passes {t:g}, " + " vs ".join(TITLES[n] for n in args.settings[::-1]),
                     "tasks", count["rl-zoo"], count["defaults"], "-")
        row["per_seed"] = [{"seed": s, **{name: passed[(name, s)] for name in args.settings}} for s in args.seeds]
        row["first_episode"] = {f"{name}-seed{seed}": {task: m[f"{t:g}"] for task, m in milestones[run].items()}
                                for run in runs for name, seed in [run]}
        figures.append(row)
    final = {run: float(np.mean([m["final_running_return"] for m in milestones[run].values()])) for run in runs}
    mean = {name: float(np.mean([final[(name, s)] for s in args.seeds])) if name in args.settings else None
            for name in SETTINGS}
    row = figure(f"LunarLander source, {args.steps} steps per task, {args.tasks} tasks x seeds {args.seeds}: mean "
                 f"final running return, " + " (beside it: ".join(TITLES[n] for n in args.settings[::-1])
                 + (")" if len(args.settings) > 1 else ""), "return", mean["rl-zoo"], None, "-")
    row.update(defaults=mean["defaults"],
               per_seed=[{"seed": s, **{name: final[(name, s)] for name in args.settings}} for s in args.seeds],
               final_running_return={f"{name}-seed{seed}": {task: round(m["final_running_return"], 1)
                                                            for task, m in milestones[(name, seed)].items()}
                                     for name, seed in runs},
               settings=SETTINGS)
    figures.append(row)
    tag = f"steps{args.steps}" + ("" if args.settings == list(SETTINGS) else "-" + "-".join(args.settings))
    plot(curves, list(args.seeds), RESULTS / f"lunarlander_source_settings_{tag}{'_quick' if args.quick else ''}.png")
    merge_report("lunarlander_source_settings", args.quick, tag, figures,
                 capability="LunarLander source (batched PPO)", page="continuous")


if __name__ == "__main__":
    main()
