"""The LLM grid world of LactChain as a gymnasium ``Env``: one step takes a *list* of moves.

The agent stands on a ``size x size`` grid at ``(x, y)`` facing an orientation (0 north = +y, 1 east = +x,
2 south = -y, 3 west = -x); ``left`` / ``right`` turn in place, ``forward`` moves one cell. Reaching the goal ends
the episode with ``goal_reward`` (later moves are ignored), leaving the grid with ``-offmap_penalty`` (with
``clip_at_wall`` the agent stays put); every executed move costs ``move_cost``. Observation: ``(x, y, orientation,
goal_x, goal_y)``; ``info``: state and info texts, ``success``, ``off_map``, ``moves``. Splits: :func:`split_configs`.
"""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ad.errors import UserError
from tasks.gridworld.config import STATE_TEXTS

#: The move vocabulary; a move's index is its integer code.
MOVES = ("forward", "left", "right")
ORIENTATIONS = ("north", "east", "south", "west")
#: (dx, dy) of a forward move for each orientation.
DELTAS = ((0, 1), (1, 0), (0, -1), (-1, 0))

Config = tuple[int, int, int, int, int]  # (x, y, orientation, goal_x, goal_y)


def check_size(size: int) -> int:
    """The grid size as an int; UserError if it is below 2."""
    if int(size) != size or size < 2:
        raise UserError(f"grid size must be an integer >= 2, got {size!r}")
    return int(size)


def parse_moves(moves: Any) -> list[int]:
    """Move codes of a move list: a string ``"forward, left"`` / ``"[forward, left]"``, or a sequence of words
    or integer codes. UserError naming the bad entry (and the vocabulary) for anything else."""
    if isinstance(moves, str):
        text = moves.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        words = [w.strip().strip("'\"") for w in text.replace(",", " ").split()]
        return [_move_code(w, moves) for w in words]
    if isinstance(moves, np.ndarray):
        moves = moves.tolist()
    if not isinstance(moves, (list, tuple)):
        raise UserError(f"a move list must be a string or a list of moves {list(MOVES)}, got {type(moves).__name__}"
                        f" {moves!r}")
    return [_move_code(m, moves) for m in moves]


def _move_code(move: Any, whole: Any) -> int:
    if isinstance(move, str):
        word = move.strip().lower()
        if word in MOVES:
            return MOVES.index(word)
        raise UserError(f"unknown move {move!r} in move list {whole!r}; moves are {', '.join(MOVES)}")
    if isinstance(move, (bool, np.bool_)) or not isinstance(move, (int, np.integer)):
        raise UserError(f"malformed move list {whole!r}: entry {move!r} is neither a move word ({', '.join(MOVES)})"
                        f" nor an integer code 0..{len(MOVES) - 1}")
    if not 0 <= int(move) < len(MOVES):
        raise UserError(f"move code {int(move)} in move list {whole!r} is out of range 0..{len(MOVES) - 1} "
                        f"({', '.join(MOVES)})")
    return int(move)


def all_configs(size: int) -> list[Config]:
    """Every (x, y, orientation, goal_x, goal_y) with the goal on another cell than the start."""
    size = check_size(size)
    cells = [(x, y) for x in range(size) for y in range(size)]
    return [(x, y, o, gx, gy) for (x, y) in cells for o in range(4) for (gx, gy) in cells if (gx, gy) != (x, y)]


def split_configs(size: int, heldout_fraction: float = 0.2, seed: int = 0) -> tuple[list[Config], list[Config]]:
    """(train, held-out) start/goal configurations: a seeded random split of :func:`all_configs`."""
    configs = all_configs(size)
    order = np.random.default_rng(seed).permutation(len(configs))
    n_held = max(1, int(round(heldout_fraction * len(configs))))
    return sorted(configs[i] for i in order[n_held:]), sorted(configs[i] for i in order[:n_held])


def info_text(size: int) -> str:
    """The info string of the original LactChain grid world."""
    return f"Grid world is size {size}x{size}"


def state_text(config: Sequence[int], style: str = "absolute") -> str:
    """Plain-text state: ``absolute`` (position, orientation, goal; the original text) or ``egocentric`` (the same, then where
    the goal lies from the agent's heading: "The goal is 2 cells ahead and 1 cell to your left.")."""
    x, y, o, gx, gy = (int(v) for v in config)
    text = f"You are at x={x}, y={y}, facing {ORIENTATIONS[o]}. The goal is at x={gx}, y={gy}."
    if style == "absolute":
        return text
    if style != "egocentric":
        raise UserError(f"unknown state text style {style!r}; choose one of {', '.join(STATE_TEXTS)}")
    dx, dy = gx - x, gy - y
    ahead = dx * DELTAS[o][0] + dy * DELTAS[o][1]  # along the heading
    right = dx * DELTAS[(o + 1) % 4][0] + dy * DELTAS[(o + 1) % 4][1]  # along the heading turned right
    cells = lambda n: f"{n} cell{'s' if n != 1 else ''}"  # noqa: E731
    parts = ([f"{cells(ahead)} ahead"] if ahead > 0 else [f"{cells(-ahead)} behind you"] if ahead < 0 else [])
    parts += ([f"{cells(right)} to your right"] if right > 0 else [f"{cells(-right)} to your left"] if right < 0
              else [])
    return f"{text} The goal is {' and '.join(parts)}."


def apply_moves(size: int, config: Sequence[int], moves: Sequence[int], clip_at_wall: bool = False
                ) -> tuple[tuple[int, int, int], int, bool, bool]:
    """Pure dynamics: ((x, y, o) after the moves, moves executed, reached goal, left the grid)."""
    x, y, o, gx, gy = (int(v) for v in config)
    executed = 0
    for m in moves:
        executed += 1
        if m == 1:
            o = (o - 1) % 4
        elif m == 2:
            o = (o + 1) % 4
        else:
            nx, ny = x + DELTAS[o][0], y + DELTAS[o][1]
            if not (0 <= nx < size and 0 <= ny < size):
                if clip_at_wall:
                    continue
                return (x, y, o), executed, False, True
            x, y = nx, ny
            if (x, y) == (gx, gy):
                return (x, y, o), executed, True, False
    return (x, y, o), executed, False, False


class GridWorldEnv(gym.Env):
    """One grid world. ``start``/``goal`` fixed, or drawn at each reset from ``configs`` (default: all)."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, size: int = 4, start: Sequence[int] | None = None, goal: Sequence[int] | None = None,
                 configs: Sequence[Config] | None = None, clip_at_wall: bool = False, goal_reward: float = 1.0,
                 move_cost: float = 0.01, offmap_penalty: float = 1.0, render_mode: str | None = None,
                 text_style: str = "absolute"):
        self.size = check_size(size)
        if text_style not in STATE_TEXTS:
            raise UserError(f"unknown state text style {text_style!r}; choose one of {', '.join(STATE_TEXTS)}")
        self.text_style = text_style
        self.clip_at_wall = bool(clip_at_wall)
        self.goal_reward, self.move_cost, self.offmap_penalty = float(goal_reward), float(move_cost), float(
            offmap_penalty)
        self.render_mode = render_mode
        if (start is None) != (goal is None):
            raise UserError("give both start (x, y, orientation) and goal (x, y), or neither")
        self.configs = [tuple(int(v) for v in c) for c in (configs or [])]
        if start is not None:
            self.configs = [self._check_config((*start, *goal))]
        for c in self.configs:
            self._check_config(c)
        self.observation_space = spaces.MultiDiscrete([self.size, self.size, 4, self.size, self.size])
        self.action_space = spaces.Sequence(spaces.Discrete(len(MOVES)))
        self.config: Config | None = None

    def _check_config(self, config: Sequence[int]) -> Config:
        if len(config) != 5:
            raise UserError(f"a start/goal configuration is (x, y, orientation, goal_x, goal_y), got {config!r}")
        x, y, o, gx, gy = (int(v) for v in config)
        if not all(0 <= v < self.size for v in (x, y, gx, gy)):
            raise UserError(f"configuration {config!r} has a cell outside the {self.size}x{self.size} grid")
        if not 0 <= o < 4:
            raise UserError(f"orientation must be 0..3 ({', '.join(ORIENTATIONS)}), got {o}")
        if (x, y) == (gx, gy):
            raise UserError(f"the goal ({gx}, {gy}) equals the start cell: choose another goal")
        return (x, y, o, gx, gy)

    @property
    def info_string(self) -> str:
        return info_text(self.size)

    def _obs(self) -> np.ndarray:
        return np.asarray(self.config, dtype=np.int64)

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"state_text": state_text(self.config, self.text_style), "info_string": self.info_string, **extra}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if options and "config" in options:
            self.config = self._check_config(options["config"])
        elif self.configs:
            self.config = self.configs[int(self.np_random.integers(len(self.configs)))]
        else:
            while True:
                x, y, o, gx, gy = (int(v) for v in self.np_random.integers(0, [self.size] * 2 + [4] + [self.size] * 2))
                if (x, y) != (gx, gy):
                    break
            self.config = (x, y, o, gx, gy)
        return self._obs(), self._info(success=False, off_map=False, moves=0)

    def step(self, action):
        if self.config is None:
            raise UserError("call reset() before step()")
        moves = parse_moves(action)
        (x, y, o), executed, success, off_map = apply_moves(self.size, self.config, moves, self.clip_at_wall)
        self.config = (x, y, o, self.config[3], self.config[4])
        reward = -self.move_cost * executed + self.goal_reward * success - self.offmap_penalty * off_map
        return self._obs(), float(reward), bool(success or off_map), False, self._info(
            success=success, off_map=off_map, moves=executed)

    def render(self):
        """Text picture (``ansi``): ``G`` goal, ``^ > v <`` the agent, ``.`` floor; north (+y) on top."""
        if self.render_mode != "ansi" or self.config is None:
            return None
        x, y, o, gx, gy = self.config
        rows = []
        for row in reversed(range(self.size)):
            rows.append("".join("^>v<"[o] if (c, row) == (x, y) else "G" if (c, row) == (gx, gy) else "."
                                for c in range(self.size)))
        return "\n".join(rows) + "\n"
