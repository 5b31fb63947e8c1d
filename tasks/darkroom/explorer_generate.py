"""``ad generate darkroom --source explorer``: nearest-unvisited explorer histories for every DarkRoom goal.

The A2C source's dataset layout, task names, split and metadata (:mod:`tasks.darkroom.generate`), with
``--num-envs`` streams of ``steps_per_goal / (num_envs * episode_length)`` episodes per goal and the explorer
(:mod:`tasks.darkroom.explorer`) as ``source``; re-running skips committed goals, and summary.json holds the same
learning figure as the A2C source's.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from ad.files import run_folder, write_json_atomic
from ad.errors import UserError
from ad.history import HistoryReader, HistoryWriter, Location
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.explorer import explore_goal
from tasks.darkroom.generate import DARKROOM, FAMILY, dataset_metadata
from tasks.darkroom.goals import resolve_goals, task_name
from tasks.grid.family import (FINAL_FRACTION, LEARNED_RATIO, finite_or_none, history_spec, ratio_summary,
                               ratio_text)

#: The explorer's options recorded as its config in the dataset metadata.
EXPLORER_OPTIONS = ("size", "goals", "steps_per_goal", "seed", "heldout_fraction", "episode_length", "random_start",
                    "terminate_on_goal", "num_envs", "epsilon", "epsilon_after_goal")


def episodes_per_stream(cfg: GenerateConfig) -> int:
    """Episodes of each explorer stream: ``steps_per_goal`` spread over ``num_envs`` streams of whole episodes."""
    return max(1, cfg.steps_per_goal // (cfg.num_envs * cfg.episode_length))


def explorer_metadata(cfg: GenerateConfig, goals: list[tuple[int, int]]) -> dict[str, Any]:
    """The A2C source's metadata (task spec, split, tasks) with the explorer as ``source``."""
    metadata = dataset_metadata(cfg, goals)
    config = {name: getattr(cfg, name) for name in EXPLORER_OPTIONS}
    config["episodes_per_stream"] = episodes_per_stream(cfg)
    metadata["source"] = {"algorithm": "explorer", "implementation": "tasks.darkroom.explorer.explore_goal",
                          "config": config}
    return metadata


def generate_explorer(cfg: GenerateConfig) -> Path | str:
    """Run the explorer on every goal of ``cfg`` and write its histories to ``cfg.out``; returns the dataset path."""
    from ad.progress import Progress

    if cfg.backend != "local":
        raise UserError("--source explorer runs in this process only (seconds for every goal); drop --backend")
    goals = resolve_goals(cfg.goals, cfg.size)
    metadata = explorer_metadata(cfg, goals)
    location = Location.of(cfg.out)
    writer = HistoryWriter(location, spec=history_spec(cfg, DARKROOM, critic=False), family=FAMILY, metadata=metadata,
                           planned_tasks=len(goals))  # raises UserError before anything is overwritten
    local = location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    todo = [g for g in goals if not writer.is_complete(task_name(cfg.size, g), cfg.seed)]
    if len(todo) < len(goals):
        print(f"resuming: {len(goals) - len(todo)} of {len(goals)} goals already in {out}")
    episodes = episodes_per_stream(cfg)
    started = time.time()
    with writer, Progress(len(todo), desc="explorer on DarkRoom goals", unit="goal",
                          show=cfg.progress and bool(todo)) as bar:  # the writer's close records committed units
        for goal in todo:
            name = task_name(cfg.size, goal)
            columns, returns = explore_goal(cfg.size, goal, cfg.num_envs, episodes, cfg.episode_length, cfg.epsilon,
                                            cfg.epsilon_after_goal, cfg.seed, cfg.random_start, cfg.terminate_on_goal)
            optimum = metadata["tasks"][name]["optimal_return"]
            last = max(1, int(round(episodes * FINAL_FRACTION)))
            with writer.unit(name, cfg.seed) as unit:  # aborted on any exception
                unit.append(columns)
                ratios = [finite_or_none(returns[:, i].mean() / optimum) if optimum > 0 else None
                          for i in (slice(-last, None), 0)]
                unit.commit(info={"final_ratio": ratios[0], "first_ratio": ratios[1], "optimal_return": optimum})
            bar.update(1)
    summary = summarize(cfg, location, metadata, time.time() - started)
    run_dir = run_folder(cfg.out, location, cfg.run_dir)
    write_json_atomic(run_dir / "summary.json", summary)
    print(f"{summary['learned_goals']}/{summary['goals']} goals reach {LEARNED_RATIO:.0%} of the optimal return over "
          f"the last {FINAL_FRACTION:.0%} of their streams (mean ratio {ratio_text(summary['mean_final_ratio'])}; "
          f"first episode {ratio_text(summary['mean_first_ratio'])}); {episodes} episodes x {cfg.num_envs} streams per "
          f"goal in {summary['seconds']:.1f}s -> {out}")
    return out


def summarize(cfg: GenerateConfig, location: Location, metadata: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The learning figure over this run's units (as the A2C source's summary) and the first episodes' ratio."""
    units = [u for u in HistoryReader(location).units() if u["run"] == cfg.seed]
    final = {u["task"]: u.get("info", {}).get("final_ratio") for u in units}
    first = np.array([u.get("info", {}).get("first_ratio") for u in units], dtype=np.float64)  # None -> NaN
    return {"source": "explorer", **ratio_summary(final),
            "mean_first_ratio": finite_or_none(np.nanmean(first)) if np.isfinite(first).any() else None,
            "criterion": f"mean return over the last {FINAL_FRACTION:.0%} of each stream >= "
                         f"{LEARNED_RATIO:.0%} of the optimum",
            "final_ratio": final, "seconds": seconds, "episodes_per_stream": episodes_per_stream(cfg),
            "split": {k: len(v) for k, v in metadata["split"].items()}}
