"""DarkRoom goals: task names, the train / held-out split, and the exact optimal return.

A DarkRoom *task* is one goal cell on a ``size x size`` grid. Tasks are named
``darkroom{size}-g{row}-{col}`` (path-safe: it names a partition folder).
"""
from __future__ import annotations

import re

import numpy as np

from ad.errors import UserError

#: (row, col) offset of each action: 0 noop, 1 up, 2 right, 3 down, 4 left.
ACTION_DELTAS = np.array([[0, 0], [-1, 0], [0, 1], [1, 0], [0, -1]], dtype=np.int64)
NUM_ACTIONS = len(ACTION_DELTAS)
ACTION_NAMES = ("noop", "up", "right", "down", "left")

_TASK_RE = re.compile(r"^darkroom(\d+)-g(\d+)-(\d+)$")


#: Largest supported room side: goals grow as size^2 and each agent's tables as size^2 too.
MAX_SIZE = 32


def check_size(size: int, room: str = "DarkRoom") -> None:
    """Raise a UserError unless ``size`` is a usable grid size (2 .. MAX_SIZE); ``room`` names the family's room
    in the message."""
    if int(size) < 2:
        raise UserError(f"{room} --size must be at least 2 (a {size}x{size} grid has no goal besides the start); "
                        "pass --size 2 or more")
    if int(size) > MAX_SIZE:
        raise UserError(f"{room} --size {size} is too large: at most {MAX_SIZE} (a {size}x{size} room has "
                        f"{int(size) ** 2 - 1} goals, each trained by its own agent); pass --size {MAX_SIZE} or less")


def start_cell(size: int) -> tuple[int, int]:
    """The fixed start cell: the centre (size//2, size//2)."""
    return size // 2, size // 2


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


def split_goals(goals: list[tuple[int, int]], heldout_fraction: float, seed: int
                ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Deterministic train / held-out split: a seeded permutation, the first ``round(f * n)`` goals held out.

    Both lists come back in the input order. At least one goal stays in train.
    """
    n = len(goals)
    n_heldout = min(int(round(heldout_fraction * n)), n - 1) if n > 1 else 0
    order = np.random.default_rng(seed).permutation(n)
    heldout_idx = set(order[:n_heldout].tolist())
    train = [g for i, g in enumerate(goals) if i not in heldout_idx]
    heldout = [g for i, g in enumerate(goals) if i in heldout_idx]
    return train, heldout


def transition_table(size: int) -> np.ndarray:
    """``next_cell[s, a]``: the cell index reached from cell ``s`` with action ``a`` (moves clipped at walls)."""
    rows, cols = np.divmod(np.arange(size * size), size)  # (S,), (S,)
    new_rows = np.clip(rows[:, None] + ACTION_DELTAS[None, :, 0], 0, size - 1)  # (S, A)
    new_cols = np.clip(cols[:, None] + ACTION_DELTAS[None, :, 1], 0, size - 1)  # (S, A)
    return new_rows * size + new_cols


def shortest_path_actions(size: int, target_cell: int) -> np.ndarray:
    """``action[s]``: an action on a shortest path from cell ``s`` to ``target_cell`` (rows first, then columns;
    noop on the target itself), shape ``(size * size,)`` int64. The room has no walls inside, so the path is the
    Manhattan one."""
    rows, cols = np.divmod(np.arange(size * size), size)  # (S,), (S,)
    t_row, t_col = divmod(int(target_cell), size)
    action = np.zeros(size * size, dtype=np.int64)  # noop on the target
    action[cols < t_col] = 2  # right
    action[cols > t_col] = 4  # left
    action[rows < t_row] = 3  # down
    action[rows > t_row] = 1  # up
    return action


def optimal_return(size: int, goal: tuple[int, int], episode_length: int, terminate_on_goal: bool,
                   random_start: bool = False) -> float:
    """Exact optimal expected return of one goal, by finite-horizon dynamic programming.

    With ``random_start`` the start cell is uniform over the grid (as the env draws it), so the
    result is the mean of the optimal return from every cell.
    """
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
