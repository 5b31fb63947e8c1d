"""``ad generate darkroom``: A2C learning histories for every DarkRoom goal, into the history store.

    from ad.config import make_config
    from tasks.darkroom.config import GenerateConfig
    from tasks.darkroom.generate import generate
    path = generate(make_config(GenerateConfig, {"out": "data/darkroom", "steps_per_goal": 100_000}))

Goals are trained in batches (all at once by default); each goal is one unit ``(task, run=seed)``
of the dataset, committed when its batch finishes. Re-running the same command skips committed
units and reruns the rest from scratch (deterministically: a goal's agent depends only on the seed
and the goal). Beside the shards, ``<out>/_run/`` holds summary.json, learning_curves.png,
greedy_policy.gif and TensorBoard logs (``_``-prefixed folders are ignored by Parquet readers);
for a remote ``--out`` URL these stay on the local disk (``--run-dir``).

With ``--backend ray`` each batch is a work unit (:mod:`ad.distributed`) run by :func:`darkroom_unit`
on a Ray worker, which writes its goals' shards itself; the driver records each finished unit in
dataset.json. The dataset is the same as the local backend's (a goal's history does not depend on
its batch), and a unit whose worker dies is rerun.
"""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ad.files import run_folder, write_json_atomic
from ad.config import data_options
from ad.distributed import WorkUnit, run_units
from ad.errors import UserError
from ad.history import ColumnSpec, HistorySpec, HistoryReader, HistoryWriter, Location
from tasks.darkroom.a2c import BatchedA2C, Rollout, denormals_flushed
from tasks.darkroom.batch_writer import BatchWriter
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.goals import (ACTION_NAMES, NUM_ACTIONS, optimal_return, resolve_goals, split_goals,
                                  start_cell, task_name)
from ad.progress import Progress
from tasks.darkroom.tracker import ReturnTracker
from tasks.noise import NOISE_OPTIONS
from tasks.random_source import RANDOM_OPTIONS

FAMILY = "darkroom"
#: Options of the explorer and noise sources only (left out of an A2C dataset's metadata, which stays what it was before them).
_EXPLORER_ONLY = ("source", "epsilon", "epsilon_after_goal", *NOISE_OPTIONS, *RANDOM_OPTIONS)
#: Goals per work unit with --backend ray when --goals-per-batch is 0.
RAY_GOALS_PER_UNIT = 8
#: Rows per shard (one Parquet file per goal for the default 400k steps).
_SHARD_ROWS = 1 << 20
#: Rows per row group: each hand-off of _FLUSH_ROWS rows (25k per goal with 80 goals) is encoded at once,
#: so encoding runs steadily beside training instead of in bursts at shard ends.
_ROW_GROUP_ROWS = 1 << 14
#: Rows buffered (over all goals of a batch) before they are handed to the writer.
_FLUSH_ROWS = 2_000_000
#: Fraction of each stream, at its end, over which the learning figure is measured.
FINAL_FRACTION = 0.05
#: A goal counts as learned when its final mean return reaches this fraction of the optimum.
LEARNED_RATIO = 0.9
#: Why a summary's mean ratio is null (summary.json is strict JSON: no NaN).
NO_RATIO = ("no task has a ratio: none finished an episode in the last {:.0%} of its stream, or its optimal return "
            "is 0; raise --steps-per-task or --episode-length")


def finite_or_none(value: float) -> float | None:
    """``value`` as a float, or None where it is NaN / infinite (JSON has no NaN)."""
    return float(value) if np.isfinite(value) else None


def ratio_summary(ratios: dict[str, float | None]) -> dict[str, Any]:
    """The learned counts and mean of per-task final ratios (None: no ratio), as strict JSON: a null mean and a
    note saying why when no task has a ratio, and how many tasks have none."""
    values = np.array([v for v in ratios.values() if v is not None], dtype=np.float64)
    learned = int((values >= LEARNED_RATIO).sum())
    out = {"goals": len(values), "learned_goals": learned, "learned_fraction": learned / max(len(values), 1),
           "mean_final_ratio": float(values.mean()) if len(values) else None,
           "tasks_without_ratio": len(ratios) - len(values)}
    if not len(values):
        out["mean_final_ratio_note"] = NO_RATIO.format(FINAL_FRACTION)
    return out


def ratio_text(value: float | None) -> str:
    """A summary's mean ratio for a progress line: 3 decimals, or why there is none."""
    return f"{value:.3f}" if value is not None else "none: no task finished an episode"


def history_spec(size: int, logprob_bits: int = 23) -> HistorySpec:
    """Columns of a DarkRoom dataset: discrete cell / action, scalar logprob, plus the critic's value."""
    return HistorySpec(state=ColumnSpec.discrete(size * size), action=ColumnSpec.discrete(NUM_ACTIONS),
                       logprob="scalar", extra={"value": "float32"}, logprob_bits=logprob_bits)


def dataset_metadata(cfg: GenerateConfig, goals: list[tuple[int, int]]) -> dict[str, Any]:
    """task_spec, source, seeds, split and per-task info (goal, optimal return, split) of a run."""
    train, heldout = split_goals(goals, cfg.heldout_fraction, cfg.seed)
    tasks = {}
    for goal in goals:
        tasks[task_name(cfg.size, goal)] = {
            "goal": list(goal), "split": "heldout" if goal in heldout else "train",
            "optimal_return": optimal_return(cfg.size, goal, cfg.episode_length, cfg.terminate_on_goal,
                                             cfg.random_start)}
    source = {k: v for k, v in data_options(cfg).items() if k not in _EXPLORER_ONLY}
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


@dataclass(frozen=True)
class GridSource:
    """What the batched-A2C generator needs from a grid task family; DarkRoom's is :data:`DARKROOM`, Key-to-Door
    passes its own to :func:`generate` (its config carries the same A2C and running options as GenerateConfig).

    Every callable is a module-level function (a Ray work unit pickles it by reference).
    """

    family: str  #: the dataset's family
    goals: Callable[[Any], list[tuple[int, ...]]]  #: the config's tasks, one agent each (goal tuples of ints)
    task_name: Callable[[Any, tuple[int, ...]], str]  #: a goal's task (unit) name
    metadata: Callable[[Any, list[tuple[int, ...]]], dict[str, Any]]  #: dataset metadata of the config's goals
    spec: Callable[[Any], HistorySpec]  #: the history columns
    agent: type = BatchedA2C  #: BatchedA2C or a subclass (its states and env)
    derive: Callable[[Any], Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None] | None = None
    """``derive(cfg)``: maps a unit's column batch to the stored columns (see BatchWriter), or None."""
    pictures: Callable[..., None] | None = None  #: ``(cfg, run_dir, metadata, curves, greedy)``: run-folder pictures
    noun: str = "goals"  #: what the family's tasks are called in printed lines ("key/door pairs")


def generate(cfg: GenerateConfig, source: GridSource | None = None) -> Path | str:
    """Run A2C (or, with ``cfg.source`` "explorer" or "noise", that source) on every goal of ``cfg``, write the learning
    histories to ``cfg.out``; returns the dataset path.

    The path is a ``Path`` for a local dataset, else the ``--out`` URL. ``source`` is the task family (DarkRoom's
    by default).
    """
    if source is None and cfg.source == "explorer":
        from tasks.darkroom.explorer_generate import generate_explorer

        return generate_explorer(cfg)
    if source is None and cfg.source in ("noise", "random"):
        from tasks.darkroom.noise_generate import generate_darkroom_noise

        return generate_darkroom_noise(cfg)
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        return _generate(cfg, source or DARKROOM)
    finally:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class UnitJob:
    """One work unit: a batch of goals of the run ``cfg`` describes, written to the dataset at ``out``."""

    cfg: GenerateConfig
    goals: list[tuple[int, ...]]
    out: str  #: absolute local path or URL (workers may not share the driver's working directory)
    source: GridSource | None = None  #: the task family (None: DarkRoom)


def darkroom_unit(job: UnitJob) -> dict[str, Any]:
    """Ray worker entry point: train one batch of goals and commit their units; the driver records them."""
    cfg, source = job.cfg, job.source or DARKROOM
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    metadata = source.metadata(cfg, source.goals(cfg))
    writer = HistoryWriter(job.out, spec=source.spec(cfg), family=source.family, metadata=metadata,
                           shard_rows=_SHARD_ROWS, row_group_rows=_ROW_GROUP_ROWS, worker=True)
    info = _train_batch(cfg, job.goals, writer, None, Progress(None, show=False), time.time(), 0, source)
    info["_pid"] = os.getpid()
    return info


def _generate(cfg: GenerateConfig, source: GridSource) -> Path | str:
    goals = source.goals(cfg)
    metadata = source.metadata(cfg, goals)
    location = Location.of(cfg.out)
    if cfg.backend == "ray" and cfg.out.startswith("memory://"):
        raise UserError(f"--backend ray cannot write to {cfg.out}: memory:// storage lives inside one process; use "
                        "a local path (one machine), a shared file system, or s3:// / gs://")
    writer = HistoryWriter(location, spec=source.spec(cfg), family=source.family, metadata=metadata,
                           shard_rows=_SHARD_ROWS, row_group_rows=_ROW_GROUP_ROWS,
                           planned_tasks=len(goals))  # raises UserError before anything is overwritten
    local = location.local_path()
    out: Path | str = Path(local) if local is not None else cfg.out
    run_dir = run_folder(cfg.out, location, cfg.run_dir)
    tb = _tensorboard(cfg, run_dir)

    per_batch = cfg.goals_per_batch or (len(goals) if cfg.backend == "local" else RAY_GOALS_PER_UNIT)
    batches = [goals[i:i + per_batch] for i in range(0, len(goals), per_batch)]
    todo = [b for b in batches if any(not writer.is_complete(source.task_name(cfg, g), cfg.seed) for g in b)]
    skipped = len(goals) - sum(len(b) for b in todo)
    if skipped:
        print(f"resuming: {skipped} of {len(goals)} {source.noun} already in {out}, {len(todo)} batch(es) to run")

    started = time.time()
    done = {"steps": 0}
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    greedy: dict[str, np.ndarray] = {}
    job_cfg = dataclasses.replace(cfg, out=local or cfg.out, progress=False, tensorboard=False, plots=False,
                                  background_writing=False)  # a Ray worker gets one CPU
    units = [WorkUnit(f"{source.task_name(cfg, b[0])}+{len(b) - 1}",
                      UnitJob(job_cfg, b, local or cfg.out, None if source is DARKROOM else source)) for b in todo]
    remote = cfg.backend != "local"
    with Progress(len(todo) if remote else len(todo) * cfg.updates, "A2C", unit="batch" if remote else "update",
                  show=cfg.progress) as bar:

        def in_process(job: UnitJob) -> dict[str, Any]:
            return _train_batch(cfg, job.goals, writer, tb, bar, started, done["steps"], source)

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
            run_units(darkroom_unit if remote else in_process, units, backend=cfg.backend, address=cfg.address,
                      workers=cfg.workers, on_result=record)
        finally:  # interrupted or not: dataset.json records every unit committed so far
            writer.close()
    if tb is not None:
        tb.close()
    elapsed = time.time() - started
    steps_done = done["steps"]

    summary = _summarize(cfg, location, metadata, elapsed, steps_done)
    write_json_atomic(run_dir / "summary.json", summary)
    if cfg.plots and curves and source.pictures is not None:
        source.pictures(cfg, run_dir, metadata, curves, greedy)
    print(f"{summary['learned_goals']}/{summary['goals']} {source.noun} ({100 * summary['learned_fraction']:.1f}%) "
          f"reach {LEARNED_RATIO:.0%} of the optimal return over the last {FINAL_FRACTION:.0%} of their streams "
          f"(mean ratio {ratio_text(summary['mean_final_ratio'])}); {steps_done:,} env steps in {elapsed:.1f}s "
          f"({steps_done / max(elapsed, 1e-9):,.0f} steps/s incl. writing) -> {out}")
    return out


def _train_batch(cfg: GenerateConfig, goals: list[tuple[int, ...]], writer: HistoryWriter, tb, bar,
                 started: float, steps_before: int, source: GridSource | None = None) -> dict[str, Any]:
    """Train one batch of goals for ``cfg.updates`` updates, streaming histories into their units."""
    source = source or DARKROOM
    batch_started = time.time()
    names = [source.task_name(cfg, g) for g in goals]
    units = {g: writer.open_unit(names[g], cfg.seed) for g in range(len(goals))
             if not writer.is_complete(names[g], cfg.seed)}
    agent = source.agent(cfg, goals, cfg.seed)
    tracker = ReturnTracker(len(goals), cfg.num_envs, cfg.updates)
    out = BatchWriter(units, cfg.num_envs, cfg.background_writing,
                      derive=source.derive(cfg) if source.derive is not None else None)
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


def _train_loop(cfg: GenerateConfig, agent: BatchedA2C, tracker: ReturnTracker, out: BatchWriter, names: list[str],
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


def _check_finite(cfg: GenerateConfig, rollout: Rollout, goal_of_env: np.ndarray, names: list[str],
                  update: int) -> None:
    """Stop (UserError) before anything is committed if an agent's log-probabilities or values are NaN / inf."""
    finite = np.isfinite(rollout.logprob) & np.isfinite(rollout.value)  # (T, E)
    if finite.all():
        return
    bad = sorted({names[g] for g in goal_of_env[~finite.all(axis=0)]})
    _diverged(cfg, f"the policy of {bad[0]}{f' (and {len(bad) - 1} more goals)' if len(bad) > 1 else ''} "
                   "gave NaN / inf log-probabilities or values", update)


def _diverged(cfg: GenerateConfig, what: str, update: int) -> None:
    raise UserError(f"A2C diverged at update {update} of {cfg.updates}: {what}; nothing of this batch was "
                    f"committed. Lower --lr (now {cfg.lr}) or --max-grad-norm (now {cfg.max_grad_norm}), or check "
                    f"--ent-coef ({cfg.ent_coef}) and --vf-coef ({cfg.vf_coef}), then re-run")


def _summarize(cfg: GenerateConfig, out: Location, metadata: dict[str, Any], elapsed: float,
               steps: int) -> dict[str, Any]:
    """The learning figure over every unit of the dataset (this run's and earlier runs')."""
    units = HistoryReader(out).units()
    ratios = {}
    for unit in units:
        info = unit.get("info", {})
        if unit["run"] == cfg.seed:
            ratio = info.get("final_ratio")
            ratios[unit["task"]] = ratio if ratio is not None and np.isfinite(ratio) else None
    return {**ratio_summary(ratios),
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


def _log_curves(tb, curves: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Per-goal binned learning curves (x: env steps per goal) of a batch that ran elsewhere (a Ray worker)."""
    for name, (steps, curve) in curves.items():
        for step, value in zip(steps, curve):
            if np.isfinite(value):
                tb.add_scalar(f"return/{name}", float(value), int(step))


def _task_name(cfg: GenerateConfig, goal: tuple[int, ...]) -> str:
    return task_name(cfg.size, goal)


def _goals(cfg: GenerateConfig) -> list[tuple[int, ...]]:
    return resolve_goals(cfg.goals, cfg.size)


def _spec(cfg: GenerateConfig) -> HistorySpec:
    return history_spec(cfg.size, cfg.logprob_bits)


#: The DarkRoom family of the generator (the default of :func:`generate`).
DARKROOM = GridSource(family=FAMILY, goals=_goals, task_name=_task_name, metadata=dataset_metadata, spec=_spec,
                      agent=BatchedA2C, pictures=_save_pictures)
