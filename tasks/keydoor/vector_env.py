"""A natively vectorised Dark Key-to-Door over (tasks x parallel envs), in numpy: DarkRoom's vector env with
a key flag per sub-env.

Same conventions as :class:`tasks.darkroom.vector_env.DarkRoomVectorEnv` (SAME_STEP autoreset, ``final_obs``,
``reset(seed=s)`` seeds sub-env ``i`` with ``s + i``), so it matches single
:class:`~tasks.keydoor.env.KeyDoorEnv` copies wrapped in ``TimeLimit`` transition for transition. The observation
is the cell; with ``observe_key`` (the A2C source's full-state view) it is ``cell + size**2 * has_key``, so a
tabular agent gets 2 * size**2 states.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from tasks.darkroom.vector_env import DarkRoomVectorEnv
from tasks.keydoor.pairs import Pair


class KeyDoorVectorEnv(DarkRoomVectorEnv):
    """``len(pairs) * envs_per_task`` Key-to-Door sub-envs, task-major (sub-env i -> pair i // envs_per_task)."""

    def __init__(self, pairs: Sequence[Pair], envs_per_task: int = 1, size: int = 9, episode_length: int = 50,
                 random_start: bool = False, observe_key: bool = False):
        self.pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 4)  # (T, 4) key row, col, door row, col
        super().__init__(self.pairs[:, :2], envs_per_task, size, episode_length, random_start,
                         terminate_on_goal=True)
        self.key_cell = self.goal_cell  # (E,) DarkRoom's goal is the key
        door = self.pairs[:, 2] * self.size + self.pairs[:, 3]  # (T,)
        self.door_cell = np.repeat(door, self.envs_per_goal)  # (E,)
        self.has_key = np.zeros(self.num_envs, dtype=bool)  # (E,)
        self.observe_key = bool(observe_key)
        if self.observe_key:
            self.single_observation_space = spaces.Discrete(2 * self.size * self.size)
            self.observation_space = batch_space(self.single_observation_space, self.num_envs)

    def _rewards(self) -> tuple[np.ndarray, np.ndarray]:
        got_key = (self.cell == self.key_cell) & ~self.has_key  # (E,)
        self.has_key |= got_key
        at_door = (self.cell == self.door_cell) & self.has_key  # (E,) ends the episode
        return got_key.astype(np.float32) + at_door.astype(np.float32), at_door

    def _observe(self) -> np.ndarray:
        if self.observe_key:
            return self.cell + self.size * self.size * self.has_key  # (E,)
        return self.cell.copy()

    def _restart(self, idx: np.ndarray) -> None:
        super()._restart(idx)
        self.has_key[idx] = False
