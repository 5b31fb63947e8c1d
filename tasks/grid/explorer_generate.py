"""``ad generate darkroom|keydoor --source explorer``: the nearest-unvisited explorer's histories on every task.

The family's A2C dataset layout, task names, split and metadata (:class:`~tasks.grid.family.GridFamily`), with
``--num-envs`` streams of ``steps / (num_envs * episode_length)`` episodes per task and the explorer (:mod:`tasks.grid.
explorer`, set up for the family by an :class:`Explorer`) as ``source``; re-running skips committed tasks, and
summary.json holds the same learning figure as the A2C source's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ad.errors import UserError
from ad.files import run_folder, write_json_atomic
from ad.history import HistoryReader, HistoryWriter, Location
from tasks.grid.family import (FINAL_FRACTION, LEARNED_RATIO, GridFamily, finite_or_none, history_spec,
                               ratio_summary, ratio_text)


@dataclass(frozen=True)
class Explorer:
    """The explorer as one family runs it: ``run(cfg, task, episodes)`` -> (the stored columns of the task's
    ``cfg.num_envs`` streams, the episode returns (streams, episodes)); ``implementation`` and ``options`` (the
    config's options) are recorded as the dataset's source. Module-level callables only."""

    run: Callable[[Any, tuple[int, ...], int], tuple[dict[str, np.ndarray], np.ndarray]]
    implementation: str
    options: tuple[str, ...]


def explorer_metadata(cfg: Any, grid: GridFamily, explorer: Explorer, tasks: list[tuple[int, ...]]) -> dict[str, Any]:
    """The family's A2C metadata (task spec, split, tasks) with the explorer as ``source``."""
    metadata = grid.metadata(cfg, tasks)
    config = {name: getattr(cfg, name) for name in explorer.options}
    config["episodes_per_stream"] = grid.episodes_per_stream(cfg)
    metadata["source"] = {"algorithm": "explorer", "implementation": explorer.implementation, "config": config}
    return metadata


def generate_explorer(cfg: Any, grid: GridFamily, explorer: Explorer) -> Path | str:
    """Run the explorer on every task of ``cfg`` and write its histories to ``cfg.out``; returns the dataset path."""
    from ad.progress import Progress

    if cfg.backend != "local":
        raise UserError("--source explorer runs in this process only (seconds for every task); drop --backend")
    tasks = grid.tasks(cfg)
    metadata = explorer_metadata(cfg, grid, explorer, tasks)
    location = Location.of(cfg.out)
    writer = HistoryWriter(location, spec=history_spec(cfg, grid, critic=False), family=grid.family,
                           metadata=metadata, planned_tasks=len(tasks))  # UserError before anything is overwritten
    local = location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    todo = [t for t in tasks if not writer.is_complete(grid.task_name(cfg.size, t), cfg.seed)]
    if len(todo) < len(tasks):
        print(f"resuming: {len(tasks) - len(todo)} of {len(tasks)} {grid.noun} already in {out}")
    episodes = grid.episodes_per_stream(cfg)
    started = time.time()
    with writer, Progress(len(todo), desc=f"explorer on {grid.title} {grid.noun}", unit="task",
                          show=cfg.progress and bool(todo)) as bar:  # the writer's close records committed units
        for task in todo:
            name = grid.task_name(cfg.size, task)
            columns, returns = explorer.run(cfg, task, episodes)
            optimum = metadata["tasks"][name]["optimal_return"]
            last = max(1, int(round(episodes * FINAL_FRACTION)))
            with writer.unit(name, cfg.seed) as unit:  # aborted on any exception
                unit.append(columns)
                ratios = [finite_or_none(returns[:, i].mean() / optimum) if optimum > 0 else None
                          for i in (slice(-last, None), 0)]
                unit.commit(info={"final_ratio": ratios[0], "first_ratio": ratios[1], "optimal_return": optimum})
            bar.update(1)
    summary = summarize(cfg, grid, location, metadata, time.time() - started)
    run_dir = run_folder(cfg.out, location, cfg.run_dir)
    write_json_atomic(run_dir / "summary.json", summary)
    print(f"{summary['learned_goals']}/{summary['goals']} {grid.noun} reach {LEARNED_RATIO:.0%} of the optimal return "
          f"over the last {FINAL_FRACTION:.0%} of their streams (mean ratio {ratio_text(summary['mean_final_ratio'])}; "
          f"first episode {ratio_text(summary['mean_first_ratio'])}); {episodes} episodes x {cfg.num_envs} streams per "
          f"task in {summary['seconds']:.1f}s -> {out}")
    return out


def summarize(cfg: Any, grid: GridFamily, location: Location, metadata: dict[str, Any],
              seconds: float) -> dict[str, Any]:
    """The learning figure over this run's units (as the A2C source's summary) and the first episodes' ratio."""
    units = [u for u in HistoryReader(location).units() if u["run"] == cfg.seed]
    final = {u["task"]: u.get("info", {}).get("final_ratio") for u in units}
    first = np.array([u.get("info", {}).get("first_ratio") for u in units], dtype=np.float64)  # None -> NaN
    return {"source": "explorer", **ratio_summary(final),
            "mean_first_ratio": finite_or_none(np.nanmean(first)) if np.isfinite(first).any() else None,
            "criterion": f"mean return over the last {FINAL_FRACTION:.0%} of each stream >= "
                         f"{LEARNED_RATIO:.0%} of the optimum",
            "final_ratio": final, "seconds": seconds, "episodes_per_stream": grid.episodes_per_stream(cfg),
            "split": {k: len(v) for k, v in metadata["split"].items()}}
