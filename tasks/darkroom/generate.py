"""``ad generate darkroom``: A2C learning histories for every DarkRoom goal, into the history store.

    from ad.config import make_config
    from tasks.darkroom.config import GenerateConfig
    from tasks.darkroom.generate import generate
    path = generate(make_config(GenerateConfig, {"out": "data/darkroom", "steps_per_goal": 100_000}))

Goals are trained in batches (all at once by default); each goal is one unit ``(task, run=seed)``
of the dataset, committed when its batch finishes. Re-running the same command skips committed
units and reruns the rest from scratch (deterministically: a goal's agent depends only on the seed
and the goal). Beside the shards, ``<out>/_run/`` holds summary.json, learning_curves.png,
greedy_policy.gif and TensorBoard logs (``_``-prefixed folders are ignored by Parquet readers).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ad.config import config_to_dict
from ad.history import ColumnSpec, HistorySpec, HistoryReader, HistoryWriter
from tasks.darkroom.a2c import BatchedA2C, Rollout
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.goals import (ACTION_NAMES, NUM_ACTIONS, optimal_return, resolve_goals, split_goals,
                                  start_cell, task_name)
from tasks.darkroom.tracker import ReturnTracker

FAMILY = "darkroom"
#: Options that change how a run executes but not the histories it writes (left out of the metadata).
_RUNTIME_OPTIONS = ("out", "goals_per_batch", "threads", "tensorboard", "log_every", "plots", "gif_goals", "progress")
#: Rows buffered (over all goals of a batch) before they are handed to the writer.
_FLUSH_ROWS = 2_000_000
#: Fraction of each stream, at its end, over which the learning figure is measured.
FINAL_FRACTION = 0.05
#: A goal counts as learned when its final mean return reaches this fraction of the optimum.
LEARNED_RATIO = 0.9


def history_spec(size: int) -> HistorySpec:
    """Columns of a DarkRoom dataset: discrete cell / action, scalar logprob, plus the critic's value."""
    return HistorySpec(state=ColumnSpec.discrete(size * size), action=ColumnSpec.discrete(NUM_ACTIONS),
                       logprob="scalar", extra={"value": "float32"})


def dataset_metadata(cfg: GenerateConfig, goals: list[tuple[int, int]]) -> dict[str, Any]:
    """task_spec, source, seeds, split and per-task info (goal, optimal return, split) of a run."""
    train, heldout = split_goals(goals, cfg.heldout_fraction, cfg.seed)
    tasks = {}
    for goal in goals:
        tasks[task_name(cfg.size, goal)] = {
            "goal": list(goal), "split": "heldout" if goal in heldout else "train",
            "optimal_return": optimal_return(cfg.size, goal, cfg.episode_length, cfg.terminate_on_goal,
                                             cfg.random_start)}
    source = {k: v for k, v in config_to_dict(cfg).items() if k not in _RUNTIME_OPTIONS}
    return {
        "task_spec": {"env": "darkroom", "env_class": "tasks.darkroom.env:DarkRoomEnv",
                      "vector_env_class": "tasks.darkroom.vector_env:DarkRoomVectorEnv", "size": cfg.size,
                      "episode_length": cfg.episode_length, "random_start": cfg.random_start,
                      "terminate_on_goal": cfg.terminate_on_goal, "start": list(start_cell(cfg.size)),
                      "num_states": cfg.size * cfg.size, "num_actions": NUM_ACTIONS,
                      "actions": list(ACTION_NAMES), "observation": "cell index row*size+col"},
        "source": {"algorithm": "a2c", "implementation": "tasks.darkroom.a2c.BatchedA2C", "config": source},
        "seeds": {"seed": cfg.seed, "run": cfg.seed},
        "split": {"train": [task_name(cfg.size, g) for g in train],
                  "heldout": [task_name(cfg.size, g) for g in heldout]},
        "tasks": tasks,
    }


#: Rollout fields that become history columns (with their storage dtypes).
_ROLLOUT_COLUMNS = {"episode": np.int32, "step": np.int32, "state": np.int16, "action": np.int8,
                    "reward": np.float32, "terminated": bool, "truncated": bool, "logprob": np.float32,
                    "value": np.float32}


def env_major(rollouts: list[Rollout]) -> dict[str, np.ndarray]:
    """Buffered rollouts as env-major columns: name -> ``(E, K*T)`` (row e = sub-env e's steps in time order)."""
    K, (T, E) = len(rollouts), rollouts[0].state.shape
    columns = {}
    for name, dtype in _ROLLOUT_COLUMNS.items():
        x = np.stack([getattr(r, name) for r in rollouts]).astype(dtype, copy=False)  # (K, T, E)
        columns[name] = np.ascontiguousarray(x.reshape(K * T, E).T)  # (E, K*T)
    update = np.array([r.update for r in rollouts], dtype=np.int64)  # (K,)
    columns["update"] = np.repeat(update, T)  # (K*T,) shared by every sub-env
    return columns


def unit_columns(columns: dict[str, np.ndarray], g: int, envs_per_goal: int) -> dict[str, np.ndarray]:
    """Goal ``g``'s column batch from :func:`env_major` columns: stream-major, time-ordered within a stream."""
    N = envs_per_goal
    steps = columns["update"].shape[0]  # K*T
    batch = {name: columns[name][g * N:(g + 1) * N].reshape(-1) for name in _ROLLOUT_COLUMNS}  # (N*K*T,) each
    batch["stream"] = np.repeat(np.arange(N, dtype=np.int32), steps)
    batch["update"] = np.tile(columns["update"], N)
    return batch


def generate(cfg: GenerateConfig) -> Path:
    """Run A2C on every goal of ``cfg``, write the learning histories to ``cfg.out``; returns the dataset path."""
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        return _generate(cfg)
    finally:
        torch.set_num_threads(threads)


def _generate(cfg: GenerateConfig) -> Path:
    goals = resolve_goals(cfg.goals, cfg.size)
    metadata = dataset_metadata(cfg, goals)
    out = Path(cfg.out)
    writer = HistoryWriter(out, spec=history_spec(cfg.size), family=FAMILY, metadata=metadata,
                           shard_rows=1 << 18)  # raises UserError before anything is overwritten
    run_dir = out / "_run"
    run_dir.mkdir(parents=True, exist_ok=True)
    tb = _tensorboard(cfg, run_dir)

    per_batch = cfg.goals_per_batch or len(goals)
    batches = [goals[i:i + per_batch] for i in range(0, len(goals), per_batch)]
    todo = [b for b in batches if any(not writer.is_complete(task_name(cfg.size, g), cfg.seed) for g in b)]
    skipped = len(goals) - sum(len(b) for b in todo)
    if skipped:
        print(f"resuming: {skipped} of {len(goals)} goals already in {out}, {len(todo)} batch(es) to run")

    started = time.time()
    steps_done = 0
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    greedy: dict[str, np.ndarray] = {}
    with _progress(cfg, total=len(todo) * cfg.updates) as bar:
        for batch in todo:
            info = _train_batch(cfg, batch, writer, tb, bar, started, steps_done)
            steps_done += info.pop("_steps")
            curves.update(info.pop("_curves"))
            greedy.update(info.pop("_greedy"))
    writer.close()
    if tb is not None:
        tb.close()
    elapsed = time.time() - started

    summary = _summarize(cfg, out, metadata, elapsed, steps_done)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    if cfg.plots and curves:
        _save_pictures(cfg, run_dir, metadata, curves, greedy)
    print(f"{summary['learned_goals']}/{summary['goals']} goals ({100 * summary['learned_fraction']:.1f}%) reach "
          f"{LEARNED_RATIO:.0%} of the optimal return over the last {FINAL_FRACTION:.0%} of their streams "
          f"(mean ratio {summary['mean_final_ratio']:.3f}); {steps_done:,} env steps in {elapsed:.1f}s "
          f"({steps_done / max(elapsed, 1e-9):,.0f} steps/s incl. writing) -> {out}")
    return out


def _train_batch(cfg: GenerateConfig, goals: list[tuple[int, int]], writer: HistoryWriter, tb, bar,
                 started: float, steps_before: int) -> dict[str, Any]:
    """Train one batch of goals for ``cfg.updates`` updates, streaming histories into their units."""
    names = [task_name(cfg.size, g) for g in goals]
    units = {g: writer.open_unit(names[g], cfg.seed) for g in range(len(goals))
             if not writer.is_complete(names[g], cfg.seed)}
    agent = BatchedA2C(cfg, goals, cfg.seed)
    tracker = ReturnTracker(len(goals), cfg.num_envs, cfg.updates)
    flush_every = max(1, _FLUSH_ROWS // (len(goals) * cfg.num_envs * cfg.num_steps))
    per_update = len(goals) * cfg.num_envs * cfg.num_steps
    buffer: list[Rollout] = []
    try:
        for u in range(cfg.updates):
            rollout, stats = agent.step()
            tracker.add(rollout)
            buffer.append(rollout)
            if len(buffer) >= flush_every or u == cfg.updates - 1:
                columns = env_major(buffer)
                for g, unit in units.items():
                    unit.append(unit_columns(columns, g, cfg.num_envs))
                buffer.clear()
            if (u + 1) % cfg.log_every == 0 or u == cfg.updates - 1:
                recent = tracker.mean_return(max(0, u + 1 - cfg.log_every), u + 1)  # (G,)
                steps = steps_before + (u + 1) * per_update
                rate = steps / max(time.time() - started, 1e-9)
                bar.update(advance=0, ret=float(np.nanmean(recent)), rate=rate)
                if tb is not None:
                    _log_scalars(tb, names, recent, stats, (u + 1) * cfg.num_envs * cfg.num_steps, rate)
            bar.update(advance=1)
    except BaseException:
        for unit in units.values():
            unit.abort()
        raise
    final = tracker.final_return(FINAL_FRACTION)  # (G,)
    for g, unit in units.items():
        optimum = writer.metadata["tasks"][names[g]]["optimal_return"]
        unit.commit(info={"final_return": float(final[g]), "optimal_return": optimum,
                          "final_ratio": float(final[g] / optimum) if optimum > 0 else None,
                          "updates": cfg.updates, "env_steps": cfg.updates * cfg.num_envs * cfg.num_steps})
    points, curve = tracker.curves()
    steps = points * cfg.num_envs * cfg.num_steps  # (P,) env steps per goal
    greedy = agent.greedy_actions()  # (G, S)
    return {"_steps": cfg.updates * per_update,
            "_curves": {names[g]: (steps, curve[:, g]) for g in range(len(goals))},
            "_greedy": {names[g]: greedy[g] for g in range(len(goals))}}


def _summarize(cfg: GenerateConfig, out: Path, metadata: dict[str, Any], elapsed: float,
               steps: int) -> dict[str, Any]:
    """The learning figure over every unit of the dataset (this run's and earlier runs')."""
    units = HistoryReader(out).units()
    ratios = {}
    for unit in units:
        info = unit.get("info", {})
        if unit["run"] == cfg.seed and info.get("final_ratio") is not None:
            ratios[unit["task"]] = info["final_ratio"]
    values = np.array(list(ratios.values()))
    learned = int((values >= LEARNED_RATIO).sum())
    return {"goals": len(values), "learned_goals": learned, "learned_fraction": learned / max(len(values), 1),
            "mean_final_ratio": float(values.mean()) if len(values) else float("nan"),
            "criterion": f"mean return over the last {FINAL_FRACTION:.0%} of each stream >= "
                         f"{LEARNED_RATIO:.0%} of the optimum",
            "final_ratio": ratios, "seconds": elapsed, "env_steps_this_run": steps,
            "steps_per_second": steps / max(elapsed, 1e-9), "preset": cfg.preset,
            "steps_per_goal": cfg.updates * cfg.num_envs * cfg.num_steps,
            "split": {k: len(v) for k, v in metadata["split"].items()}}


def _save_pictures(cfg: GenerateConfig, run_dir: Path, metadata: dict[str, Any],
                   curves: dict[str, tuple[np.ndarray, np.ndarray]], greedy: dict[str, np.ndarray]) -> None:
    """learning_curves.png (goals trained in this run) and greedy_policy.gif (a few of them)."""
    from tasks.darkroom.plots import greedy_policy_gif, plot_learning_curves

    names = list(curves)
    steps = curves[names[0]][0]
    curve = np.stack([curves[n][1] for n in names], axis=1)  # (P, G)
    optimum = np.array([metadata["tasks"][n]["optimal_return"] for n in names])  # (G,)
    plot_learning_curves(run_dir / "learning_curves.png", steps, curve, optimum, names)
    if cfg.gif_goals:
        shown = names[:: max(1, len(names) // cfg.gif_goals)][: cfg.gif_goals]
        greedy_policy_gif(run_dir / "greedy_policy.gif", cfg.size,
                          [tuple(metadata["tasks"][n]["goal"]) for n in shown],
                          np.stack([greedy[n] for n in shown]), cfg.episode_length, cfg.terminate_on_goal)


def _tensorboard(cfg: GenerateConfig, run_dir: Path):
    if not cfg.tensorboard:
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(run_dir / "tb"))


def _log_scalars(tb, names: list[str], recent: np.ndarray, stats: dict[str, torch.Tensor], step: int,
                 rate: float) -> None:
    """Per-goal return and batch-mean losses at ``step`` env steps per goal."""
    for name, value in zip(names, recent):
        if np.isfinite(value):
            tb.add_scalar(f"return/{name}", float(value), step)
    tb.add_scalar("mean/return", float(np.nanmean(recent)), step)
    for key, value in stats.items():
        tb.add_scalar(f"mean/{key}", float(value.mean()), step)
    tb.add_scalar("throughput/env_steps_per_s", rate, step)


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, **kwargs):
        pass


class _Bar:
    """A rich progress bar over updates showing env steps/s and the recent mean return."""

    def __init__(self, total: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("[bold]A2C updates"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[rate]:>9,.0f} env steps/s"),
                                 TextColumn("mean return {task.fields[ret]:.3f}"), TimeRemainingColumn())
        self.task = self.progress.add_task("a2c", total=total, rate=0.0, ret=float("nan"))

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def update(self, advance: int = 0, **fields):
        self.progress.update(self.task, advance=advance, **fields)


def _progress(cfg: GenerateConfig, total: int):
    return _Bar(total) if cfg.progress else _NoBar()
