"""Task distributions over any Gymnasium env: a task is the env id plus keyword arguments.

A tasks file (YAML or JSON) gives either a list of kwargs or a seeded sampler over ranges::

    tasks:                      # a list: one kwargs mapping per task
      - {gravity: -10.0}
      - {gravity: -8.0, enable_wind: true, wind_power: 10.0}
    reference_return: 200       # optional: the return reported as 1.0 (an optimum, or a "solved" threshold)

    sample:                     # or a sampler: `count` tasks, each kwarg fixed or drawn
      count: 20
      kwargs:
        gravity: {uniform: [-11.0, -5.0]}
        wind_power: {uniform: [0.0, 15.0]}
        turbulence_power: {choice: [0.5, 1.0, 1.5]}
        enable_wind: true

Draws depend only on the generate command's ``--seed``; the train / held-out split too.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from ad.errors import UserError

#: Most tasks one dataset may hold (each is a unit: a partition folder of histories).
MAX_TASKS = 10_000


def task_prefix(env_id: str) -> str:
    """A path-safe task-id prefix from an env id: ``LunarLander-v3`` -> ``lunarlander-v3``."""
    return re.sub(r"[^a-z0-9.+-]+", "-", env_id.lower()).strip("-.") or "env"


def load_tasks(path: str | None, seed: int) -> tuple[list[dict[str, Any]], float | None]:
    """(kwargs of each task, reference return or None) from a tasks file; no file = one task with no kwargs."""
    if not path:
        return [{}], None
    file = Path(path).expanduser()
    if not file.is_file():
        raise UserError(f"--tasks {path}: no such file; give a YAML or JSON tasks file (see `ad generate gym --help`)")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"--tasks {path} is not UTF-8 text (byte {err.start}); save it as UTF-8") from None
    try:
        import yaml

        data = yaml.safe_load(text)
    except Exception as err:  # noqa: BLE001 -- yaml's errors are many; each is the user's file
        raise UserError(f"--tasks {path} is not valid YAML/JSON: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict) or ("tasks" in data) == ("sample" in data):
        raise UserError(f"--tasks {path} must be a mapping with either `tasks:` (a list of kwargs) or `sample:`")
    reference = data.get("reference_return")
    if reference is not None and (isinstance(reference, bool) or not isinstance(reference, (int, float))
                                  or not math.isfinite(reference)):
        raise UserError(f"--tasks {path}: reference_return must be a finite number, got {reference!r}")
    tasks = _listed(data["tasks"], path) if "tasks" in data else _sampled(data["sample"], seed, path)
    if not 1 <= len(tasks) <= MAX_TASKS:
        raise UserError(f"--tasks {path} gives {len(tasks)} tasks; give 1..{MAX_TASKS}")
    for i, kwargs in enumerate(tasks):
        check_finite(kwargs, f"--tasks {path}, task {i}")
    return tasks, None if reference is None else float(reference)


def _listed(items: Any, path: str) -> list[dict[str, Any]]:
    if not isinstance(items, list) or not all(isinstance(t, dict) for t in items):
        raise UserError(f"--tasks {path}: `tasks:` must be a list of mappings (one kwargs mapping per task)")
    return [dict(t) for t in items]


def _sampled(spec: Any, seed: int, path: str) -> list[dict[str, Any]]:
    if not isinstance(spec, dict) or not isinstance(spec.get("count"), int) or isinstance(spec.get("count"), bool):
        raise UserError(f"--tasks {path}: `sample:` needs an integer `count` and a `kwargs` mapping")
    kwargs = spec.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise UserError(f"--tasks {path}: `sample.kwargs` must be a mapping of kwarg -> value or distribution")
    rng = np.random.default_rng([seed, 1])
    return [{name: _draw(rule, rng, f"--tasks {path}, sample.kwargs.{name}") for name, rule in kwargs.items()}
            for _ in range(spec["count"])]


def _draw(rule: Any, rng: np.random.Generator, where: str) -> Any:
    if not isinstance(rule, dict):
        return rule
    if set(rule) == {"uniform"}:
        bounds = rule["uniform"]
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, (int, float)) for b in bounds)
                and bounds[0] <= bounds[1]):
            raise UserError(f"{where}: uniform needs [low, high] with low <= high, got {bounds!r}")
        return float(rng.uniform(bounds[0], bounds[1]))
    if set(rule) == {"choice"}:
        options = rule["choice"]
        if not isinstance(options, list) or not options:
            raise UserError(f"{where}: choice needs a non-empty list, got {options!r}")
        return options[int(rng.integers(len(options)))]
    raise UserError(f"{where}: a distribution is {{uniform: [low, high]}} or {{choice: [...]}}, got {rule!r}")


def check_finite(value: Any, where: str) -> None:
    """A UserError naming ``where`` if ``value`` (or any number inside it) is not finite."""
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{where}: {value} is not a finite number")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{where}.{k}")
    if isinstance(value, list):
        for v in value:
            check_finite(v, where)

