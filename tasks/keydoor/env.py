"""The single Dark Key-to-Door environment (gymnasium ``Env``), same dynamics as toymeta's ``DarkKeyToDoor``.

The agent walks a dark ``size x size`` room (:mod:`tasks.grid.room`) and sees only its cell index. After each move:
reward 1.0 the first time it stands on the key; reward 1.0 when it stands on the door carrying the key, which ends
the episode. ``info["has_key"]`` says whether the key is carried (for analysis).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tasks.grid.room import GridEnv
from tasks.keydoor.pairs import Pair, all_pairs, parse_pair


class KeyDoorEnv(GridEnv):
    """One Key-to-Door task. ``pair=None`` draws a (key, door) pair at every reset."""

    def __init__(self, size: int = 9, pair: Pair | str | None = None, random_start: bool = False,
                 render_mode: str | None = None):
        self._pairs = all_pairs(int(size))  # checks the size
        super().__init__(size, random_start, render_mode)
        if isinstance(pair, str):
            pair = parse_pair(pair, self.size)
        self.fixed_pair = None if pair is None else tuple(int(x) for x in pair)
        if self.fixed_pair is not None and self.fixed_pair not in set(self._pairs):
            raise ValueError(f"pair {pair} is not two distinct cells of the {size}x{size} room")
        self.pair = self.fixed_pair
        self.has_key = False

    def _new_episode(self) -> None:
        if self.fixed_pair is None:
            self.pair = self._pairs[int(self.np_random.integers(len(self._pairs)))]
        self.has_key = False

    def _reward(self) -> tuple[float, bool]:
        key_reward = float(self.cell == self.pair[0] * self.size + self.pair[1] and not self.has_key)
        self.has_key = self.has_key or bool(key_reward)
        door_reward = float(self.cell == self.pair[2] * self.size + self.pair[3] and self.has_key)
        return key_reward + door_reward, bool(door_reward)

    def _info(self) -> dict[str, Any]:
        return {"has_key": self.has_key}

    def _paint(self, grid: np.ndarray) -> None:
        """The key in yellow (until taken), the door in brown."""
        if not self.has_key:
            grid[self.pair[0], self.pair[1]] = (255, 255, 0)
        grid[self.pair[2], self.pair[3]] = (128, 64, 48)
