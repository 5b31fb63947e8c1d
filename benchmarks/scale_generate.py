"""Generation beyond one process: the Ray backend vs the local backend, and crash safety end to end.

Figures:
- env steps/s of `ad generate darkroom` with --backend ray on a 2-CPU local Ray instance (2 workers,
  units of 8 goals, the Ray default) vs --backend local (this process, all 80 goals in one batch,
  1 thread), both including history writing and (for Ray) starting the workers;
- seconds per goal-history measured on the Ray workers (8-goal units, what 2,000 histories on 256
  CPUs also get), and from it an estimate of the wall time of 2,000 DarkRoom histories (400k
  steps each, the standard preset) on a 16-node cluster of 16-CPU machines;
- crash test: `ad generate` SIGKILLed at random moments five times and resumed each time, then a
  Ray worker SIGKILLed mid-unit: runs killed, runs resumed, transitions lost and duplicated
  against an uninterrupted run (goal: 0 and 0).

    python benchmarks/scale_generate.py           # 80 goals x 200k steps per backend; crash test on 5x5
    python benchmarks/scale_generate.py --quick   # 80 goals x 20k steps; crash test on 3x3 (about 1 min)

`kill_and_resume`, `kill_ray_worker_mid_unit` and `transition_diff` are also what
tests/test_scale_crash.py and tests/test_scale_ray.py run.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small version (< 1 min)")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

from ad.history import HistoryReader  # noqa: E402


KEY_COLUMNS = ["task", "run", "stream", "update", "episode", "step"]
#: The cluster of the estimate.
NODES, CPUS_PER_NODE, HISTORIES, STEPS_PER_HISTORY = 16, 16, 2_000, 400_000


# ---------------------------------------------------------------------------- crash harness
def transition_diff(reference: Any, got: Any) -> tuple[int, int]:
    """(transitions of ``reference`` missing from ``got``, transitions stored more than once in ``got``).

    A transition is identified by (task, run, stream, update, episode, step).
    """
    def keys(path: Any) -> list[tuple]:
        table = HistoryReader(path).table(columns=KEY_COLUMNS)
        return list(zip(*(table.column(c).to_pylist() for c in KEY_COLUMNS)))

    ref, mine = keys(reference), keys(got)
    unique = set(mine)
    return len(set(ref) - unique), len(mine) - len(unique)


def ad_command(*args: str) -> list[str]:
    """``python -m ad ...`` with this interpreter."""
    return [sys.executable, "-m", "ad", *args]


def _units_done(out: Path) -> int:
    """Complete units of the dataset at ``out`` (it must read cleanly at any moment)."""
    return len(HistoryReader(out).units()) if (out / "dataset.json").exists() else 0


def _writing_since(out: Path, started: float) -> bool:
    """Whether a unit was opened (its staging folder created) after ``started``."""
    return any(os.stat(p).st_mtime > started for p in glob.glob(str(out / ".staging" / "task=*" / "run=*")))


def read_with_globs(out: Path) -> dict[str, int]:
    """Rows of the dataset at ``out`` as DuckDB and polars read it through the README's glob
    ``<out>/**/*.parquet`` (hive partitioning on); raises whatever they raise on a file they cannot read."""
    import duckdb
    import polars as pl

    pattern = f"{out}/**/*.parquet"
    if not glob.glob(pattern, recursive=True):
        return {"duckdb": 0, "polars": 0}  # nothing committed yet: both refuse an empty glob
    with duckdb.connect() as con:
        rows_duckdb = con.sql(f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning=true)").fetchall()[0][0]
    rows_polars = pl.scan_parquet(pattern, hive_partitioning=True).select(pl.len()).collect().item()
    return {"duckdb": int(rows_duckdb), "polars": int(rows_polars)}


def kill_and_resume(argv: list[str], out: Path, total_units: int, kills: int = 5, unit_seconds: float = 0.5,
                    seed: int = 0, timeout: float = 300.0, probe: Any = None) -> dict[str, Any]:
    """Run ``argv`` (an ``ad generate`` command writing ``out``) and SIGKILL it ``kills`` times at random moments.

    Kill ``k`` waits until about ``k / kills`` of the ``total_units`` units are complete (a random
    count in that stretch, never the last unit) and the process is writing a unit, then comes after
    a uniform random delay in ``[0, 0.8 * unit_seconds]`` (``unit_seconds``: a unit's typical
    time): a random moment inside the work, so every run makes some progress. The command is rerun (resumed) after each kill and runs to the end after the last.
    After every kill the partial dataset must read cleanly. Returns the counts and the number of
    complete units after each kill. ``probe(out)``, if given, is called while each run is in progress (between
    polls) and after each kill; its failures are counted and the first few messages returned, not raised.
    """
    rng = random.Random(seed)
    killed, finished_early, units_after_kill = 0, 0, []
    probes = {"reads": 0, "failures": 0, "errors": []}

    def check(moment: str) -> None:
        if probe is None:
            return
        probes["reads"] += 1
        try:
            probe(out)
        except Exception as err:  # noqa: BLE001 -- counted and reported: the figure is how often readers fail
            probes["failures"] += 1
            if len(probes["errors"]) < 5:
                probes["errors"].append(f"{moment}: {type(err).__name__}: {str(err)[:300]}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for k in range(kills):
        low = min(total_units * k // kills, total_units - 2)  # the last unit is never the one killed
        target = rng.randint(low, max(low, min(total_units * (k + 1) // kills - 1, total_units - 2)))
        started = time.time()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and time.time() < started + timeout:
            if _units_done(out) >= target and _writing_since(out, started):
                time.sleep(rng.uniform(0.0, 0.8 * unit_seconds))
                break
            check(f"run {k + 1} in progress")
            time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        else:
            finished_early += 1  # ended before the kill came: nothing to kill
        proc.wait()
        units_after_kill.append(_units_done(out))  # reads cleanly after a kill
        check(f"after kill {k + 1}")
    final = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    if final.returncode != 0:
        raise RuntimeError(f"the resumed run failed:\n{final.stderr[-2000:]}")
    check("after the final run")
    return {"killed": killed, "resumed": kills, "finished_before_kill": finished_early,
            "units_after_kill": units_after_kill, "probe_reads": probes["reads"],
            "probe_failures": probes["failures"], "probe_errors": probes["errors"]}


def ray_unit_processes(function: str = "grid_unit") -> list[int]:
    """PIDs of Ray worker processes running ``function`` right now (Ray titles them ``ray::<function>``)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                title = fh.read().split(b"\0")[0]
        except OSError:
            continue
        if title == f"ray::{function}".encode():
            pids.append(int(entry))
    return pids


def kill_ray_worker_mid_unit(cfg: Any, after: float = 1.0, timeout: float = 300.0) -> dict[str, Any]:
    """Generate ``cfg`` (``--backend ray``, Ray already initialised) and SIGKILL one worker while it runs a unit.

    The worker is killed ``after`` seconds after a unit starts running. Returns the killed pid and
    whether generation finished (the unit reran on another worker).
    """
    from tasks.darkroom.generate import generate

    errors: list[BaseException] = []

    def target() -> None:
        try:
            generate(cfg)
        except BaseException as err:  # noqa: BLE001 - reported to the caller
            errors.append(err)

    thread = threading.Thread(target=target)
    thread.start()
    deadline, victim = time.time() + timeout, None
    while victim is None and time.time() < deadline and thread.is_alive():
        running = ray_unit_processes()
        if running:
            time.sleep(after)
            if running[0] in ray_unit_processes():
                victim = running[0]
                os.kill(victim, signal.SIGKILL)
        time.sleep(0.05)
    thread.join(timeout=max(1.0, deadline - time.time()))
    if errors:
        raise errors[0]
    return {"killed_pid": victim, "finished": not thread.is_alive()}


# ---------------------------------------------------------------------------- throughput
def _config(out: str, steps: int, size: int = 9, **kw: Any) -> Any:
    from ad.config import make_config
    from tasks.darkroom.config import GenerateConfig

    return make_config(GenerateConfig, {"out": out, "size": size, "steps_per_goal": steps, "progress": False,
                                        "tensorboard": False, "plots": False, **kw})


def throughput(work: Path, steps: int, workers: int = 2) -> dict[str, Any]:
    """Seconds and env steps/s of the same 80-goal job on the local backend and on Ray (``workers`` CPUs)."""
    import ray

    from ad.history import content_hash
    from tasks.darkroom.generate import generate

    from tasks.grid.generate import RAY_GOALS_PER_UNIT

    goals, per_unit = 80, RAY_GOALS_PER_UNIT
    start = time.perf_counter()
    generate(_config(str(work / "local"), steps))
    local_s = time.perf_counter() - start
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        start = time.perf_counter()
        generate(_config(str(work / "ray"), steps, backend="ray", workers=workers))
        ray_s = time.perf_counter() - start
    finally:
        ray.shutdown()
    same_as_local = content_hash(work / "ray") == content_hash(_same_batches(work, steps, per_unit))
    env_steps = goals * HistoryReader(work / "local").units()[0]["info"]["env_steps"]
    # per-unit cost on a worker: the unit's training + writing time, recorded with each of its goals
    records = [u["info"] for u in HistoryReader(work / "ray").units()]
    busy = sum(r["batch_seconds"] / r["batch_goals"] for r in records)  # worker-seconds over all units
    return {"local_s": local_s, "ray_s": ray_s, "env_steps": env_steps, "per_unit": per_unit,
            "seconds_per_goal": busy / goals, "same_as_local": same_as_local,
            "overhead_s": max(0.0, ray_s - busy / workers),
            "unit_seconds": sorted({r["batch_seconds"] for r in records})}


def _same_batches(work: Path, steps: int, per_unit: int) -> Path:
    """The local backend with Ray's batches (a goal's floats depend on its batch size in the last bit)."""
    from tasks.darkroom.generate import generate

    return Path(generate(_config(str(work / "local-same-batches"), steps, goals_per_batch=per_unit)))


# ---------------------------------------------------------------------------- crash figures
def crash_figures(work: Path, quick: bool) -> dict[str, Any]:
    """Five SIGKILLs of `ad generate` (resumed each time) and one Ray worker killed mid-unit."""
    import ray

    from ad.history import content_hash

    size, steps, per_batch = (3, 20_000, 1) if quick else (5, 40_000, 2)
    argv_of = lambda out: ad_command("generate", "darkroom", "--out", str(out), "--size", str(size),  # noqa: E731
                                     "--steps-per-goal", str(steps), "--goals-per-batch", str(per_batch),
                                     "--progress", "false", "--plots", "false", "--tensorboard", "false")
    subprocess.run(argv_of(work / "crash-ref"), check=True, capture_output=True)
    units = HistoryReader(work / "crash-ref").units()
    unit_seconds = statistics.median(u["info"]["batch_seconds"] for u in units)
    stats = kill_and_resume(argv_of(work / "crash"), work / "crash", total_units=len(units) // per_batch, kills=5,
                            unit_seconds=unit_seconds, seed=1)
    lost, duplicated = transition_diff(work / "crash-ref", work / "crash")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ray_stats = kill_ray_worker_mid_unit(_config(str(work / "ray-crash"), steps, size=size, backend="ray",
                                                     goals_per_batch=per_batch * 2), after=0.5)
    finally:
        ray.shutdown()
    ray_lost, ray_dup = transition_diff(work / "crash-ref", work / "ray-crash")
    return {"killed": stats["killed"], "resumed": stats["resumed"], "lost": lost, "duplicated": duplicated,
            "equal_hash": content_hash(work / "crash") == content_hash(work / "crash-ref"),
            "ray_killed": int(ray_stats["killed_pid"] is not None), "ray_lost": ray_lost, "ray_duplicated": ray_dup}


def main(args: argparse.Namespace) -> None:
    steps = 20_000 if args.quick else 200_000
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tp = throughput(work, steps)
        crash = crash_figures(work, args.quick)
    cluster_cpus = NODES * CPUS_PER_NODE
    per_history = tp["seconds_per_goal"] * STEPS_PER_HISTORY / steps  # CPU-seconds of one 400k-step history
    units = math.ceil(HISTORIES / tp["per_unit"])
    # whole waves of units, one unit per CPU at a time, plus the start-up / scheduling overhead measured here
    estimate = math.ceil(units / cluster_cpus) * tp["per_unit"] * per_history + tp["overhead_s"]
    print(f"ray units of {tp['per_unit']} goals: {tp['ray_s']:.1f}s on 2 workers (unit seconds {tp['unit_seconds']}, "
          f"overhead {tp['overhead_s']:.1f}s); dataset identical to the local backend with the same batches: "
          f"{tp['same_as_local']}; crash test: {crash}")
    figures = [
        figure("env steps/s incl. writing: --backend ray (2 local CPUs, 2 workers) vs --backend local (1 process)",
               "steps/s", tp["env_steps"] / tp["ray_s"], tp["env_steps"] / tp["local_s"],
               "near parity on 2 CPUs (ratio ~1)"),
        figure(f"CPU-seconds per DarkRoom history (one goal, {STEPS_PER_HISTORY:,} steps, scaled from {steps:,}) "
               f"on a Ray worker, in {tp['per_unit']}-goal units", "s", per_history, None,
               "input of the cluster estimate"),
        figure(f"estimated wall time of {HISTORIES:,} DarkRoom histories x {STEPS_PER_HISTORY:,} steps on "
               f"{NODES} nodes x {CPUS_PER_NODE} CPUs (Ray, {tp['per_unit']}-goal units, one per CPU at a time, "
               "+ the start-up overhead measured here; storage assumed not the bottleneck)", "s",
               estimate, None, "estimate from the per-unit cost measured here"),
        figure("crash test: `ad generate` runs SIGKILLed at random moments (each resumed)", "runs",
               crash["killed"], None, "5"),
        figure("crash test: transitions lost after 5 kills + resumes, and after a Ray worker killed mid-unit",
               "transitions", crash["lost"] + crash["ray_lost"], None, "0"),
        figure("crash test: transitions duplicated after 5 kills + resumes, and after a Ray worker killed mid-unit",
               "transitions", crash["duplicated"] + crash["ray_duplicated"], None, "0"),
    ]
    report("scale_generate", figures, args.quick, page="scale-out")


if __name__ == "__main__":
    main(ARGS)
