"""LunarLander tasks: a task is one setting of Gymnasium's own LunarLander kwargs (gravity, wind, turbulence).

Task ``i`` of a dataset is named ``lunarlander-t0007`` and its kwargs are drawn by a generator keyed by (seed, i)
only, so a task's settings never depend on how many tasks a dataset has. :func:`check_kwargs` is the one range check
(Gymnasium asserts gravity in (-12, 0) and only warns about wind outside [0, 20] or turbulence outside [0, 2]).
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ad.errors import UserError

PREFIX = "lunarlander"
#: Gymnasium's accepted ranges: gravity strictly inside (-12, 0); wind and turbulence inside [0, 20] / [0, 2].
GRAVITY = (-12.0, 0.0)
WIND_POWER = (0.0, 20.0)
TURBULENCE_POWER = (0.0, 2.0)
#: The return Gymnasium calls "solved"; reported as 1.0 (the optimal return of every task).
SOLVED = 200.0
KWARGS = ("gravity", "enable_wind", "wind_power", "turbulence_power", "action_map")
#: The identity ``action_map``: action 0 does nothing, 1 fires the left engine, 2 the main engine, 3 the right one.
ENGINES = (0, 1, 2, 3)
#: the permutations of the three engines (actions 1-3) other than the identity
SWAPS = [list(p) for p in itertools.permutations(ENGINES[1:]) if list(p) != list(ENGINES[1:])]


def task_name(i: int) -> str:
    """``lunarlander-t0007``: the task id of task ``i`` (a path-safe partition name)."""
    return f"{PREFIX}-t{i:04d}"


def check_number(value: Any, low: float, high: float, where: str, open_low: bool = False,
                 open_high: bool = False) -> float:
    """``value`` as a float if it is a finite number in the range, else a UserError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"{where} must be a finite number, got {value!r}")
    if value < low or value > high or (open_low and value == low) or (open_high and value == high):
        left, right = "(" if open_low else "[", ")" if open_high else "]"
        raise UserError(f"{where} must be in {left}{low:g}, {high:g}{right} (Gymnasium's LunarLander range), "
                        f"got {value!r}")
    return float(value)


def check_kwargs(kwargs: dict[str, Any], where: str = "task") -> dict[str, Any]:
    """The LunarLander kwargs of one task, checked against Gymnasium's ranges (a UserError otherwise)."""
    unknown = sorted(set(kwargs) - set(KWARGS))
    if unknown:
        raise UserError(f"{where}: unknown LunarLander kwargs {unknown}; use {', '.join(KWARGS)}")
    out: dict[str, Any] = {}
    if "gravity" in kwargs:
        out["gravity"] = check_number(kwargs["gravity"], *GRAVITY, f"{where}: gravity", open_low=True, open_high=True)
    if "enable_wind" in kwargs:
        if not isinstance(kwargs["enable_wind"], bool):
            raise UserError(f"{where}: enable_wind must be true or false, got {kwargs['enable_wind']!r}")
        out["enable_wind"] = kwargs["enable_wind"]
    if "wind_power" in kwargs:
        out["wind_power"] = check_number(kwargs["wind_power"], *WIND_POWER, f"{where}: wind_power")
    if "turbulence_power" in kwargs:
        out["turbulence_power"] = check_number(kwargs["turbulence_power"], *TURBULENCE_POWER,
                                               f"{where}: turbulence_power")
    if "action_map" in kwargs:
        out["action_map"] = check_action_map(kwargs["action_map"], where)
    return out


def check_action_map(value: Any, where: str) -> list[int]:
    """An ``action_map`` (which of Gymnasium's actions each of the agent's 4 actions takes) as a list, or a UserError:
    it must be a permutation of 0..3."""
    if not isinstance(value, (list, tuple)) or sorted(v for v in value if isinstance(v, int)
                                                      and not isinstance(v, bool)) != list(ENGINES):
        raise UserError(f"{where}: action_map must be a permutation of {list(ENGINES)} (the Gymnasium action each "
                        f"of the 4 actions takes), got {value!r}")
    return [int(v) for v in value]


def sample_tasks(count: int, seed: int, gravity: tuple[float, float], wind_fraction: float,
                 wind_power: tuple[float, float], turbulence_power: tuple[float, float],
                 swap_fraction: float = 0.0) -> list[dict[str, Any]]:
    """``count`` tasks' kwargs: gravity ~ U(gravity), wind on with probability ``wind_fraction`` and then
    wind_power ~ U(wind_power), turbulence_power ~ U(turbulence_power); with probability ``swap_fraction`` the three
    engines are permuted (``action_map``: one of the 5 permutations of actions 1-3 other than the identity, drawn
    uniformly). Task i's draw depends on (seed, i) only (the engine draws come after the others, so tasks without
    swaps are those of ``swap_fraction`` 0)."""
    tasks = []
    for i in range(count):
        rng = np.random.default_rng([seed, i, 7])
        g = float(rng.uniform(*gravity))
        wind = bool(rng.random() < wind_fraction)
        kwargs: dict[str, Any] = {"gravity": round(g, 4), "enable_wind": wind}
        w, t = float(rng.uniform(*wind_power)), float(rng.uniform(*turbulence_power))
        if wind:
            kwargs.update(wind_power=round(w, 4), turbulence_power=round(t, 4))
        if swap_fraction > 0 and rng.random() < swap_fraction:
            kwargs["action_map"] = [0, *SWAPS[int(rng.integers(len(SWAPS)))]]
        tasks.append(check_kwargs(kwargs, f"task {i}"))
    return tasks
