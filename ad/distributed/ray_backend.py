"""The Ray backend of :func:`ad.distributed.run_units`: one Ray task per work unit.

The driver keeps at most ``workers`` units in flight, hands each finished unit's result to
``on_result`` at once (so a dataset records units as they complete), and reruns a unit whose
worker process or node died. Tasks are submitted with ``max_retries=0`` and retried here, so every
rerun is visible (a line on stderr) and bounded by ``max_attempts``. An exception raised inside a
unit function is not retried: a UserError comes back as itself, anything else as Ray's error with
the remote traceback.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from ad.distributed.units import WorkUnit, require_ray
from ad.errors import UserError


def _worker_lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray errors meaning "the process or machine running the unit went away" (rerun the unit)."""
    names = ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "OutOfMemoryError", "ObjectLostError",
             "OwnerDiedError")
    return tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))


def connect(ray: Any, address: str, workers: int) -> bool:
    """Join the cluster at ``address`` or start a local one; True if this call started Ray (so it shuts it down)."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
    if address:
        kwargs["address"] = address
    elif workers:
        kwargs["num_cpus"] = workers
    try:
        ray.init(**kwargs)
    except ConnectionError as err:
        raise UserError(f"cannot reach the Ray cluster at --address {address!r} ({err}); start it with "
                        "`ray start --head` or drop --address to run a local Ray instance") from None
    return True


def run_on_ray(fn: Callable[[Any], Any], units: Sequence[WorkUnit], *, address: str, workers: int,
               cpus_per_unit: float, max_attempts: int,
               on_result: Callable[[WorkUnit, Any], None] | None) -> dict[str, Any]:
    """Run every unit as a Ray task (see :func:`ad.distributed.run_units` for the arguments)."""
    ray = require_ray()
    started_here = connect(ray, address, workers)
    lost = _worker_lost_errors(ray)
    remote = ray.remote(num_cpus=cpus_per_unit, max_retries=0)(fn)
    capacity = workers or max(1, int(ray.cluster_resources().get("CPU", 1) // cpus_per_unit))
    pending = list(units)
    attempts = {u.key: 0 for u in units}
    running: dict[Any, WorkUnit] = {}  # ObjectRef -> unit
    results: dict[str, Any] = {}
    try:
        while pending or running:
            while pending and len(running) < capacity:
                unit = pending.pop(0)
                attempts[unit.key] += 1
                running[remote.remote(unit.payload)] = unit
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                unit = running.pop(ref)
                try:
                    result = ray.get(ref)
                except lost as err:
                    if attempts[unit.key] >= max_attempts:
                        raise RuntimeError(f"work unit {unit.key} lost its worker {attempts[unit.key]} times; "
                                           f"giving up (last error: {type(err).__name__})") from err
                    print(f"work unit {unit.key}: its worker died ({type(err).__name__}); rerunning it "
                          f"(attempt {attempts[unit.key] + 1} of {max_attempts})", file=sys.stderr)
                    pending.insert(0, unit)
                    continue
                except ray.exceptions.RayTaskError as err:
                    cause = getattr(err, "cause", None)
                    if isinstance(cause, UserError):
                        raise cause from None
                    raise
                results[unit.key] = result
                if on_result is not None:
                    on_result(unit, result)
    except BaseException:
        for ref in running:  # stop the units still running; their partial output is redone on resume
            ray.cancel(ref, force=True)
        raise
    finally:
        if started_here:
            ray.shutdown()
    return results
