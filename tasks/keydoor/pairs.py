"""Dark Key-to-Door tasks: (key cell, door cell) pairs, their names (``keydoor{size}-k{row}-{col}-d{row}-{col}``), the
seeded draw (:func:`draw_pairs`) and the exact optimum. A 9x9 room has 81 * 80 = 6480 tasks.
"""
from __future__ import annotations

import re

import numpy as np

from ad.errors import UserError
from tasks.grid.room import check_size, start_cell, transition_table

#: A task: (key row, key col, door row, door col).
Pair = tuple[int, int, int, int]

_TASK_RE = re.compile(r"^keydoor(\d+)-k(\d+)-(\d+)-d(\d+)-(\d+)$")


def all_pairs(size: int) -> list[Pair]:
    """Every ordered pair of distinct cells (key, door), key-major in row-major cell order."""
    check_size(size, "Key-to-Door")
    cells = [(r, c) for r in range(size) for c in range(size)]
    return [(*k, *d) for k in cells for d in cells if k != d]


def task_name(size: int, pair: Pair) -> str:
    """``keydoor9-k1-2-d7-7`` for size 9, key (1, 2), door (7, 7)."""
    kr, kc, dr, dc = (int(x) for x in pair)
    return f"keydoor{size}-k{kr}-{kc}-d{dr}-{dc}"


def parse_task_name(name: str) -> tuple[int, Pair]:
    """Inverse of :func:`task_name`: ``(size, (key row, key col, door row, door col))``."""
    match = _TASK_RE.match(name)
    if match is None:
        raise UserError(f"{name!r} is not a Key-to-Door task name; expected e.g. 'keydoor9-k1-2-d7-7'")
    size, *pair = (int(g) for g in match.groups())
    return size, tuple(pair)


def parse_pair(text: str, size: int) -> Pair:
    """Parse ``"kr,kc/dr,dc"`` (or a task name) into a pair on a ``size`` grid; UserError if it is not one."""
    text = str(text).strip()
    if text.startswith("keydoor"):
        pair_size, pair = parse_task_name(text)
        if pair_size != size:
            raise UserError(f"task {text!r} is for a {pair_size}x{pair_size} room but --size is {size}")
    else:
        try:
            key, door = text.split("/")
            pair = tuple(int(x) for x in key.split(",")) + tuple(int(x) for x in door.split(","))
            if len(pair) != 4:
                raise ValueError
        except ValueError:
            raise UserError(f"pair {text!r} is not 'key_row,key_col/door_row,door_col' "
                            "(e.g. --pairs 0,0/8,8)") from None
    if not all(0 <= x < size for x in pair):
        raise UserError(f"pair {text!r} is outside the {size}x{size} room; rows and columns run 0..{size - 1}")
    if pair[:2] == pair[2:]:
        raise UserError(f"pair {text!r} puts the key and the door in the same cell; they must differ")
    return pair


def draw_pairs(size: int, count: int, seed: int, pairs: list[str] | None = None) -> list[Pair]:
    """The tasks of a dataset: the ``pairs`` named (deduplicated, in order), else ``count`` pairs drawn by ``seed``
    without replacement (0 or more than exist: all of them), in :func:`all_pairs` order."""
    if pairs:
        return list(dict.fromkeys(parse_pair(text, size) for text in pairs))  # first occurrences, in order
    every = all_pairs(size)
    if count <= 0 or count >= len(every):
        return every
    chosen = np.sort(np.random.default_rng([int(seed), int(size), 17]).choice(len(every), count, replace=False))
    return [every[i] for i in chosen]


def steps_needed(size: int, pair: Pair, random_start: bool = False) -> int:
    """Fewest steps an episode needs to reach the key, then the door, from the start cell (from the farthest cell
    with ``random_start``). Shorter episodes cannot score 2."""
    kr, kc, dr, dc = pair
    if random_start:
        to_key = max(kr, size - 1 - kr) + max(kc, size - 1 - kc)
    else:
        sr, sc = start_cell(size)
        to_key = abs(sr - kr) + abs(sc - kc) or 1  # starting on the key: "stay" steps onto it
    return to_key + abs(kr - dr) + abs(kc - dc)


def optimal_return(size: int, pair: Pair, episode_length: int, random_start: bool = False) -> float:
    """Exact optimal expected return of one task, by finite-horizon dynamic programming over (cell, key carried);
    with ``random_start`` the mean over start cells. On 9x9 with 50 steps every task's optimum is 2.0."""
    next_cell = transition_table(size)  # (S, A)
    key, door = pair[0] * size + pair[1], pair[2] * size + pair[3]
    key_reward = (next_cell == key).astype(np.float64)  # (S, A) without the key
    door_reward = (next_cell == door).astype(np.float64)  # (S, A) with the key: terminal
    no_key = np.zeros(size * size)  # values with 0 steps left
    has_key = np.zeros(size * size)
    for _ in range(episode_length):
        has_key, no_key = ((door_reward + (1 - door_reward) * has_key[next_cell]).max(axis=1),
                           (key_reward * (1 + has_key[next_cell]) + (1 - key_reward) * no_key[next_cell]).max(axis=1))
    if random_start:
        return float(no_key.mean())
    r, c = start_cell(size)
    return float(no_key[r * size + c])
