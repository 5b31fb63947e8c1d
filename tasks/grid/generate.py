"""The A2C source of the grid families: A2C learning histories for every task of a family, into the history store.

A family (:class:`~tasks.grid.family.GridFamily`: DarkRoom's in :mod:`tasks.darkroom.generate`, Key-to-Door's in
:mod:`tasks.keydoor.generate`) says what its tasks are, how they are named and which env its agents walk; this
module does the rest. Tasks are trained in batches; each task is one unit ``(task, run=seed)``, committed when its
batch finishes, and re-running the command skips committed units (a task's agent depends only on seed and task).
``<out>/_run/`` (``--run-dir`` for a remote ``--out``) holds summary.json, the pictures and TensorBoard logs.
With ``--backend ray`` each batch is a work unit (:mod:`ad.distributed`) run by :func:`grid_unit` on a Ray worker,
which writes its tasks' shards itself; the dataset is the same as the local backend's.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ad.distributed import WorkUnit, run_units
from ad.errors import UserError
from ad.files import run_folder, write_json_atomic
from ad.history import HistoryReader, HistoryWriter, Location
from ad.progress import Progress
from tasks.grid.a2c import BatchedA2C, Rollout, denormals_flushed
from tasks.grid.family import (FINAL_FRACTION, LEARNED_RATIO, Goal, GridFamily, finite_or_none, history_spec,
                               ratio_summary, ratio_text)
from tasks.grid.rollouts import BatchWriter, ReturnTracker

#: Goals per work unit with --backend ray when --goals-per-batch is 0.
RAY_GOALS_PER_UNIT = 8
#: Rows per shard (one Parquet file per goal for the default 400k steps).
_SHARD_ROWS = 1 << 20
#: Rows per row group: each hand-off of _FLUSH_ROWS rows (25k per goal with 80 goals) is encoded at once,
#: so encoding runs steadily beside training instead of in bursts at shard ends.
_ROW_GROUP_ROWS = 1 << 14
#: Rows buffered (over all goals of a batch) before they are handed to the writer.
_FLUSH_ROWS = 2_000_000
def generate_a2c(cfg: Any, family: GridFamily) -> Path | str:
    """Run A2C on every task of ``cfg`` (a config of ``family``), write the learning histories to ``cfg.out``;
    returns the dataset path: a ``Path`` for a local dataset, else the ``--out`` URL."""
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        return _generate(cfg, family)
    finally:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class UnitJob:
    """One work unit: a batch of tasks of the run ``cfg`` describes, written to the dataset at ``out``."""

    cfg: Any
    goals: list[Goal]
    out: str  #: absolute local path or URL (workers may not share the driver's working directory)
    family: GridFamily


def grid_unit(job: UnitJob) -> dict[str, Any]:
    """Ray worker entry point: train one batch of tasks and commit their units; the driver records them."""
    cfg, family = job.cfg, job.family
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    metadata = family.metadata(cfg, family.tasks(cfg))
    writer = HistoryWriter(job.out, spec=history_spec(cfg, family, critic=True), family=family.family,
                           metadata=metadata, shard_rows=_SHARD_ROWS, row_group_rows=_ROW_GROUP_ROWS, worker=True)
    info = _train_batch(cfg, job.goals, writer, None, Progress(None, show=False), time.time(), 0, family)
    info["_pid"] = os.getpid()
    return info


def _generate(cfg: Any, family: GridFamily) -> Path | str:
    goals = family.tasks(cfg)
    metadata = family.metadata(cfg, goals)
    location = Location.of(cfg.out)
    if cfg.backend == "ray" and cfg.out.startswith("memory://"):
        raise UserError(f"--backend ray cannot write to {cfg.out}: memory:// storage lives inside one process; use "
                        "a local path (one machine), a shared file system, or s3:// / gs://")
    writer = HistoryWriter(location, spec=history_spec(cfg, family, critic=True), family=family.family,
                           metadata=metadata, shard_rows=_SHARD_ROWS, row_group_rows=_ROW_GROUP_ROWS,
                           planned_tasks=len(goals))  # raises UserError before anything is overwritten
    local = location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    run_dir = run_folder(cfg.out, location, cfg.run_dir)
    tb = _tensorboard(cfg, run_dir)

    per_batch = cfg.goals_per_batch or (len(goals) if cfg.backend == "local" else RAY_GOALS_PER_UNIT)
    batches = [goals[i:i + per_batch] for i in range(0, len(goals), per_batch)]
    names = {g: family.task_name(cfg.size, g) for g in goals}
    todo = [b for b in batches if any(not writer.is_complete(names[g], cfg.seed) for g in b)]
    skipped = len(goals) - sum(len(b) for b in todo)
    if skipped:
        print(f"resuming: {skipped} of {len(goals)} {family.noun} already in {out}, {len(todo)} batch(es) to run")

    started = time.time()
    done = {"steps": 0}
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    greedy: dict[str, np.ndarray] = {}
    job_cfg = dataclasses.replace(cfg, out=local or cfg.out, progress=False, tensorboard=False, plots=False,
                                  background_writing=False)  # a Ray worker gets one CPU
    units = [WorkUnit(f"{names[b[0]]}+{len(b) - 1}", UnitJob(job_cfg, b, local or cfg.out, family)) for b in todo]
    remote = cfg.backend != "local"
    with Progress(len(todo) if remote else len(todo) * cfg.updates, "A2C", unit="batch" if remote else "update",
                  show=cfg.progress) as bar:

        def in_process(job: UnitJob) -> dict[str, Any]:
            return _train_batch(cfg, job.goals, writer, tb, bar, started, done["steps"], family)

        def record(unit: WorkUnit, info: dict[str, Any]) -> None:
            if remote:  # the worker committed the units; record them here, as they finish
                for unit_record in info["_records"]:
                    writer.record_unit(unit_record)
                if tb is not None:
                    _log_curves(tb, info["_curves"])
            done["steps"] += info["_steps"]
            curves.update(info["_curves"])
            greedy.update(info["_greedy"])
            if remote:
                bar.update(1, env_steps_per_s=f"{done['steps'] / max(time.time() - started, 1e-9):,.0f}",
                           mean_return=float(np.nanmean([c[1][-1] for c in info["_curves"].values()])))

        try:
            run_units(grid_unit if remote else in_process, units, backend=cfg.backend, address=cfg.address,
                      workers=cfg.workers, on_result=record)
        finally:  # interrupted or not: dataset.json records every unit committed so far
            writer.close()
    if tb is not None:
        tb.close()
    elapsed = time.time() - started
    steps_done = done["steps"]

    summary = _summarize(cfg, location, metadata, elapsed, steps_done)
    write_json_atomic(run_dir / "summary.json", summary)
    if cfg.plots and curves:
        _save_pictures(cfg, family, run_dir, metadata, curves, greedy)
    print(f"{summary['learned_goals']}/{summary['goals']} {family.noun} ({100 * summary['learned_fraction']:.1f}%) "
          f"reach {LEARNED_RATIO:.0%} of the optimal return over the last {FINAL_FRACTION:.0%} of their streams "
          f"(mean ratio {ratio_text(summary['mean_final_ratio'])}); {steps_done:,} env steps in {elapsed:.1f}s "
          f"({steps_done / max(elapsed, 1e-9):,.0f} steps/s incl. writing) -> {out}")
    return out


def _train_batch(cfg: Any, goals: list[Goal], writer: HistoryWriter, tb, bar, started: float, steps_before: int,
                 family: GridFamily) -> dict[str, Any]:
    """Train one batch of goals for ``cfg.updates`` updates, streaming histories into their units."""
    batch_started = time.time()
    names = [family.task_name(cfg.size, g) for g in goals]
    units = {g: writer.open_unit(names[g], cfg.seed) for g in range(len(goals))
             if not writer.is_complete(names[g], cfg.seed)}
    agent = BatchedA2C(cfg, goals, cfg.seed, family)
    tracker = ReturnTracker(len(goals), cfg.num_envs, cfg.updates)
    out = BatchWriter(units, cfg.num_envs, cfg.background_writing,
                      derive=None if family.derive is None else functools.partial(family.derive, cfg))
    try:
        with denormals_flushed(), np.errstate(over="ignore", invalid="ignore"):  # divergence: _check_finite says
            _train_loop(cfg, agent, tracker, out, names, tb, bar, started, steps_before)
        out.finish()
    except BaseException:
        out.close()  # lets a write in flight end before its unit is dropped
        for unit in units.values():
            unit.abort()
        raise
    out.close()
    final = tracker.final_return(FINAL_FRACTION)  # (G,)
    batch_seconds = round(time.time() - batch_started, 3)  # training + writing, before the commits
    records = []
    for g, unit in units.items():
        optimum = writer.metadata["tasks"][names[g]]["optimal_return"]
        records.append(unit.commit(info={"final_return": finite_or_none(final[g]), "optimal_return": optimum,
                                         "final_ratio": finite_or_none(final[g] / optimum) if optimum > 0 else None,
                                         "updates": cfg.updates,
                                         "env_steps": cfg.updates * cfg.num_envs * cfg.num_steps,
                                         "batch_goals": len(goals),
                                         "batch_seconds": batch_seconds}))
    points, curve = tracker.curves()
    steps = points * cfg.num_envs * cfg.num_steps  # (P,) env steps per goal
    greedy = agent.greedy_actions()  # (G, S)
    return {"_steps": cfg.updates * len(goals) * cfg.num_envs * cfg.num_steps, "_records": records,
            "_curves": {names[g]: (steps, curve[:, g]) for g in range(len(goals))},
            "_greedy": {names[g]: greedy[g] for g in range(len(goals))}}


def _train_loop(cfg: Any, agent: BatchedA2C, tracker: ReturnTracker, out: BatchWriter, names: list[str],
                tb, bar, started: float, steps_before: int) -> None:
    """``cfg.updates`` A2C updates; rollouts go to ``out`` every ``_FLUSH_ROWS`` rows, progress to ``bar`` / ``tb``."""
    per_update = len(names) * cfg.num_envs * cfg.num_steps
    flush_every = max(1, _FLUSH_ROWS // per_update)
    buffer: list[Rollout] = []
    for u in range(cfg.updates):
        log_now = (u + 1) % cfg.log_every == 0 or u == cfg.updates - 1
        rollout, stats = agent.step(stats=log_now and tb is not None)  # stats only where they are logged
        _check_finite(cfg, rollout, agent.goal_of_env, names, u)
        tracker.add(rollout)
        buffer.append(rollout)
        if len(buffer) >= flush_every or u == cfg.updates - 1:
            out.submit(buffer)
            buffer = []  # a new list: the writer may still be reading the old one
        if log_now:
            recent = tracker.mean_return(max(0, u + 1 - cfg.log_every), u + 1)  # (G,)
            steps = steps_before + (u + 1) * per_update
            rate = steps / max(time.time() - started, 1e-9)
            bar.update(0, env_steps_per_s=f"{rate:,.0f}", mean_return=float(np.nanmean(recent)))
            if tb is not None:
                _log_scalars(tb, names, recent, stats, (u + 1) * cfg.num_envs * cfg.num_steps, rate)
        bar.update(1)
    if not all(bool(torch.isfinite(p).all()) for p in agent.params):
        _diverged(cfg, "its parameters turned non-finite in the last update", cfg.updates)


def _check_finite(cfg: Any, rollout: Rollout, goal_of_env: np.ndarray, names: list[str],
                  update: int) -> None:
    """Stop (UserError) before anything is committed if an agent's log-probabilities or values are NaN / inf."""
    finite = np.isfinite(rollout.logprob) & np.isfinite(rollout.value)  # (T, E)
    if finite.all():
        return
    bad = sorted({names[g] for g in goal_of_env[~finite.all(axis=0)]})
    _diverged(cfg, f"the policy of {bad[0]}{f' (and {len(bad) - 1} more goals)' if len(bad) > 1 else ''} "
                   "gave NaN / inf log-probabilities or values", update)


def _diverged(cfg: Any, what: str, update: int) -> None:
    raise UserError(f"A2C diverged at update {update} of {cfg.updates}: {what}; nothing of this batch was "
                    f"committed. Lower --learning-rate (now {cfg.learning_rate}) or --max-grad-norm (now "
                    f"{cfg.max_grad_norm}), or check --ent-coef ({cfg.ent_coef}) and --vf-coef ({cfg.vf_coef}), then "
                    "re-run")


def _summarize(cfg: Any, out: Location, metadata: dict[str, Any], elapsed: float,
               steps: int) -> dict[str, Any]:
    """The learning figure over every unit of the dataset (this run's and earlier runs')."""
    ratios = {}
    for unit in HistoryReader(out).units():
        if unit["run"] == cfg.seed:
            ratio = unit.get("info", {}).get("final_ratio")
            ratios[unit["task"]] = ratio if ratio is not None and np.isfinite(ratio) else None
    return {**ratio_summary(ratios),
            "criterion": f"mean return over the last {FINAL_FRACTION:.0%} of each stream >= "
                         f"{LEARNED_RATIO:.0%} of the optimum",
            "final_ratio": ratios, "seconds": elapsed, "env_steps_this_run": steps,
            "steps_per_second": steps / max(elapsed, 1e-9), "preset": cfg.preset,
            "steps_per_goal": cfg.updates * cfg.num_envs * cfg.num_steps,
            "split": {k: len(v) for k, v in metadata["split"].items()}}


def _save_pictures(cfg: Any, family: GridFamily, run_dir: Path, metadata: dict[str, Any],
                   curves: dict[str, tuple[np.ndarray, np.ndarray]], greedy: dict[str, np.ndarray]) -> None:
    """learning_curves.png (the tasks trained in this run), then the family's own pictures."""
    from tasks.grid.plots import plot_learning_curves

    names = list(curves)
    curve = np.stack([curves[n][1] for n in names], axis=1)  # (P, G)
    optimum = np.array([metadata["tasks"][n]["optimal_return"] for n in names])  # (G,)
    plot_learning_curves(run_dir / "learning_curves.png", curves[names[0]][0], curve, optimum, names, family.title)
    if family.pictures is not None:
        family.pictures(cfg, run_dir, metadata, greedy)


def _tensorboard(cfg: Any, run_dir: Path):
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


def _log_curves(tb, curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Per-goal binned learning curves (x: env steps per goal) of a batch that ran elsewhere (a Ray worker)."""
    for name, (steps, curve) in curves.items():
        for step, value in zip(steps, curve):
            if np.isfinite(value):
                tb.add_scalar(f"return/{name}", float(value), int(step))
