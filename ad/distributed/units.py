"""Run a job's work units on a backend: ``local`` (in this process, one after another) or ``ray``.

A task cuts its job into :class:`WorkUnit` s and supplies one function per unit, which does the unit's whole work
(writing its shards) wherever the backend runs it and returns a small picklable result for ``on_result``. A unit
whose worker dies is rerun from scratch, so unit functions must be deterministic and redo partial work from the
start (``HistoryWriter.open_unit`` drops a unit's leftovers).

    from ad.distributed import WorkUnit, run_units
    units = [WorkUnit(f"batch-{i}", payload) for i, payload in enumerate(payloads)]
    run_units(do_one_unit, units, backend="ray", workers=2, on_result=lambda unit, result: ...)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ad.errors import UserError

BACKENDS = ("local", "ray")
RAY_INSTALL_HINT = "pip install 'algorithm-distillation[ray]'"


@dataclass(frozen=True)
class WorkUnit:
    """One independent piece of a job."""

    key: str  #: unique name, for progress and error messages
    payload: Any  #: the unit function's argument (picklable for Ray)


def check_backend_options(backend: str, address: str, workers: int) -> None:
    """UserError unless ``--backend / --address / --workers`` make sense together (ray need not be installed yet)."""
    if backend not in BACKENDS:
        raise UserError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if workers < 0:
        raise UserError(f"--workers must be >= 0 (0: one per CPU of the cluster), got {workers}")
    if backend == "local" and address:
        raise UserError("--address only applies to --backend ray; drop it or add --backend ray")


def require_ray() -> Any:
    """The ``ray`` module, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(f"--backend ray needs Ray, which is not installed: {RAY_INSTALL_HINT}") from None
    return ray


def run_units(fn: Callable[[Any], Any], units: Sequence[WorkUnit], *, backend: str = "local", address: str = "",
              workers: int = 0, cpus_per_unit: float = 1.0, max_attempts: int = 3,
              on_result: Callable[[WorkUnit, Any], None] | None = None) -> dict[str, Any]:
    """Run ``fn(unit.payload)`` for every unit on ``backend``; returns ``{unit.key: result}``.

    Args:
        fn: a module-level function (Ray ships it to workers by reference).
        units: the work, independent units in the order they should start.
        backend: "local" (in this process, in order) or "ray".
        address: Ray cluster to join ("auto", "ray://host:10001", "host:6379"); "" starts a local Ray
            instance (unless this process already called ``ray.init``).
        workers: most units running at once (0: as many as the cluster has CPUs / ``cpus_per_unit``);
            for a new local Ray instance it is also its CPU count.
        cpus_per_unit: CPUs Ray reserves for each unit.
        max_attempts: tries per unit when its worker dies (an exception raised by ``fn`` is not retried).
        on_result: called in the driver with ``(unit, result)`` as each unit finishes.
    """
    check_backend_options(backend, address, workers)
    keys = [u.key for u in units]
    if len(set(keys)) != len(keys):
        raise ValueError("work unit keys must be unique")
    if backend == "ray":
        from ad.distributed.ray_backend import run_on_ray

        return run_on_ray(fn, units, address=address, workers=workers, cpus_per_unit=cpus_per_unit,
                          max_attempts=max_attempts, on_result=on_result)
    results = {}
    for unit in units:
        results[unit.key] = fn(unit.payload)
        if on_result is not None:
            on_result(unit, results[unit.key])
    return results
