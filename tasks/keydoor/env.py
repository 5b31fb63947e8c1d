"""The single Dark Key-to-Door environment (gymnasium ``Env``), same dynamics as toymeta's ``DarkKeyToDoor``.

The agent walks a dark ``size x size`` room and sees only its cell index ``row * size + col`` (not whether it
carries the key). Actions: 0 noop, 1 up, 2 right, 3 down, 4 left, clipped at the walls (the grid room's,
:mod:`tasks.grid.room`). After each
move: reward 1.0 the first time the agent stands on the key; reward 1.0 when it stands on the door carrying the
key, which ends the episode (``terminated``). The start is the centre, or a uniformly random cell with
``random_start``. Episode length comes from gymnasium's ``TimeLimit`` (``max_episode_steps`` at registration:
50, see ``tasks/keydoor/__init__.py``). ``info["has_key"]`` says whether the key is carried (for analysis).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tasks.grid.room import NUM_ACTIONS, start_cell, transition_table
from tasks.keydoor.pairs import Pair, all_pairs, parse_pair


class KeyDoorEnv(gym.Env):
    """One Key-to-Door task. ``pair=None`` draws a (key, door) pair at every reset."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, size: int = 9, pair: Pair | str | None = None, random_start: bool = False,
                 render_mode: str | None = None):
        self.size = int(size)
        self._pairs = all_pairs(self.size)  # checks the size
        if isinstance(pair, str):
            pair = parse_pair(pair, self.size)
        self.fixed_pair = None if pair is None else tuple(int(x) for x in pair)
        if self.fixed_pair is not None and self.fixed_pair not in set(self._pairs):
            raise ValueError(f"pair {pair} is not two distinct cells of the {size}x{size} room")
        self.pair = self.fixed_pair
        self.random_start = bool(random_start)
        self.render_mode = render_mode
        self.observation_space = spaces.Discrete(self.size * self.size)
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self._next_cell = transition_table(self.size)  # (S, A)
        self.cell, self.has_key = -1, False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self.fixed_pair is None:
            self.pair = self._pairs[int(self.np_random.integers(len(self._pairs)))]
        if self.random_start:
            row, col = self.np_random.integers(0, self.size, size=2)
        else:
            row, col = start_cell(self.size)
        self.cell, self.has_key = int(row) * self.size + int(col), False
        return self.cell, {"has_key": False}

    def step(self, action):
        assert self.cell >= 0, "call reset() before step()"
        self.cell = int(self._next_cell[self.cell, int(action)])
        key_reward = float(self.cell == self.pair[0] * self.size + self.pair[1] and not self.has_key)
        self.has_key = self.has_key or bool(key_reward)
        door_reward = float(self.cell == self.pair[2] * self.size + self.pair[3] and self.has_key)
        return self.cell, key_reward + door_reward, bool(door_reward), False, {"has_key": self.has_key}

    def render(self):
        """An RGB image (size, size, 3): white floor, yellow key (until taken), brown door, green agent."""
        if self.render_mode != "rgb_array":
            return None
        grid = np.full((self.size, self.size, 3), 255, dtype=np.uint8)
        if not self.has_key:
            grid[self.pair[0], self.pair[1]] = (255, 255, 0)
        grid[self.pair[2], self.pair[3]] = (128, 64, 48)
        row, col = divmod(self.cell, self.size)
        grid[row, col] = (0, 255, 0)
        return grid
