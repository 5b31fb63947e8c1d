"""DarkRoom goals: task names (``darkroom{size}-g{row}-{col}``, one goal cell each), the goals of a command line, and
the exact optimal return.
"""
from __future__ import annotations

import re

import numpy as np

from ad.errors import UserError
from tasks.grid.room import check_size, start_cell, transition_table

_TASK_RE = re.compile(r"^darkroom(\d+)-g(\d+)-(\d+)$")


def all_goals(size: int) -> list[tuple[int, int]]:
    """Every cell but the centre, in row-major order (80 goals on 9x9)."""
    check_size(size)
    start = start_cell(size)
    return [(r, c) for r in range(size) for c in range(size) if (r, c) != start]


def task_name(size: int, goal: tuple[int, int]) -> str:
    """``darkroom9-g2-3`` for size 9, goal row 2, col 3."""
    return f"darkroom{size}-g{int(goal[0])}-{int(goal[1])}"


def parse_task_name(name: str) -> tuple[int, tuple[int, int]]:
    """Inverse of :func:`task_name`: ``(size, (row, col))``."""
    match = _TASK_RE.match(name)
    if match is None:
        raise UserError(f"{name!r} is not a DarkRoom task name; expected e.g. 'darkroom9-g2-3'")
    size, row, col = (int(g) for g in match.groups())
    return size, (row, col)


def parse_goal(text: str, size: int) -> tuple[int, int]:
    """Parse ``"r,c"`` (or a task name) into a goal cell on a ``size`` grid; raise UserError if it is off the grid."""
    text = str(text).strip()
    if text.startswith("darkroom"):
        goal_size, goal = parse_task_name(text)
        if goal_size != size:
            raise UserError(f"goal {text!r} is for a {goal_size}x{goal_size} grid but --size is {size}")
    else:
        parts = text.replace(":", ",").split(",")
        try:
            if len(parts) != 2:
                raise ValueError
            goal = (int(parts[0]), int(parts[1]))
        except ValueError:
            raise UserError(f"goal {text!r} is not 'row,col' (e.g. --goals 0,0 2,3) or 'all'") from None
    if not (0 <= goal[0] < size and 0 <= goal[1] < size):
        raise UserError(f"goal {text!r} is outside the {size}x{size} grid; rows and columns run 0..{size - 1}")
    return goal


def resolve_goals(specs: list[str], size: int) -> list[tuple[int, int]]:
    """Goals named on the command line (``all`` or ``r,c`` items), deduplicated, in the given order."""
    check_size(size)
    if not specs or [s.strip().lower() for s in specs] == ["all"]:
        return all_goals(size)
    goals: list[tuple[int, int]] = []
    for spec in specs:
        if spec.strip().lower() == "all":
            raise UserError("--goals: 'all' cannot be mixed with explicit goals")
        goal = parse_goal(spec, size)
        if goal not in goals:
            goals.append(goal)
    return goals


def optimal_return(size: int, goal: tuple[int, int], episode_length: int, terminate_on_goal: bool,
                   random_start: bool = False) -> float:
    """Exact optimal expected return of one goal, by finite-horizon dynamic programming; with ``random_start`` the
    mean of the optimal return from every cell (the env's start is uniform)."""
    next_cell = transition_table(size)  # (S, A)
    goal_cell = goal[0] * size + goal[1]
    reward = (next_cell == goal_cell).astype(np.float64)  # (S, A)
    keep = 1.0 - reward if terminate_on_goal else np.ones_like(reward)  # no future after termination
    value = np.zeros(size * size)  # value with 0 steps left
    for _ in range(episode_length):
        value = (reward + keep * value[next_cell]).max(axis=1)  # (S,)
    if random_start:
        return float(value.mean())
    r, c = start_cell(size)
    return float(value[r * size + c])
