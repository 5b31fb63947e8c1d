"""A natively vectorised Dark Key-to-Door over (tasks x parallel envs), in numpy: the shared grid room
(:class:`tasks.grid.room.GridVectorEnv`) with a key and a door per sub-env, matching single
:class:`~tasks.keydoor.env.KeyDoorEnv` copies in ``TimeLimit`` transition for transition. The observation is the
cell, or with ``observe_key`` (the A2C source's full-state view) ``cell + size**2 * has_key``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from tasks import vector_tasks
from tasks.grid.room import GridVectorEnv, room_tasks
from tasks.keydoor.pairs import Pair, all_pairs, optimal_return, parse_pair, parse_task_name


class KeyDoorVectorEnv(GridVectorEnv):
    """``len(pairs) * envs_per_task`` Key-to-Door sub-envs, task-major (sub-env i -> pair i // envs_per_task)."""

    room = "Key-to-Door"

    def __init__(self, pairs: Sequence[Pair] | None, envs_per_task: int = 1, size: int = 9,
                 episode_length: int = 50, random_start: bool = False, observe_key: bool = False):
        """``pairs=None``: ``envs_per_task`` sub-envs, each drawing its pair at every reset."""
        random_pairs = pairs is None
        if random_pairs:  # one row per sub-env, filled at every reset
            pairs, envs_per_task = np.zeros((int(envs_per_task), 4), dtype=np.int64), 1
            self._every_pair = all_pairs(int(size))  # checks the size
        self.pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 4)  # (T, 4) key row, col, door row, col
        super().__init__(self.pairs[:, :2], envs_per_task, size, episode_length, random_start,
                         terminate_on_goal=True)
        self.random_goals = random_pairs  # the room's restart then draws pairs (_draw_tasks)
        self.key_cell = self.goal_cell  # (E,) the room's goal is the key
        door = self.pairs[:, 2] * self.size + self.pairs[:, 3]  # (T,)
        self.door_cell = np.repeat(door, self.envs_per_goal)  # (E,)
        self.has_key = np.zeros(self.num_envs, dtype=bool)  # (E,)
        self.observe_key = bool(observe_key)
        if self.observe_key:
            self.single_observation_space = spaces.Discrete(2 * self.size * self.size)
            self.observation_space = batch_space(self.single_observation_space, self.num_envs)

    @property
    def optimal(self) -> np.ndarray:
        """Each sub-env's exact optimal return on its pair (E,): 2.0 where both key and door are reachable."""
        per_task = [optimal_return(self.size, tuple(int(x) for x in pair), self.episode_length, self.random_start)
                    for pair in self.pairs]
        return np.repeat(np.asarray(per_task, dtype=np.float64), self.envs_per_goal)

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

    def _draw_tasks(self, idx: np.ndarray) -> None:
        """New pairs for the sub-envs ``idx`` (``pairs=None``), each drawn as the single env draws it."""
        for i in idx:
            self.pairs[i] = self._every_pair[int(self._rngs[i].integers(len(self._every_pair)))]
            self.key_cell[i] = self.pairs[i, 0] * self.size + self.pairs[i, 1]
            self.door_cell[i] = self.pairs[i, 2] * self.size + self.pairs[i, 3]


def make_vector_env(num_envs: int = 1, size: int = 9, pair: Pair | str | None = None,
                    pairs: Sequence[Pair | str] | None = None, random_start: bool = False,
                    max_episode_steps: int = 50, observe_key: bool = False) -> KeyDoorVectorEnv:
    """The ``vector_entry_point`` of the gymnasium ids: ``num_envs`` sub-envs on ``pair``, on ``pairs``
    (:func:`tasks.vector_tasks`; ``"kr,kc/dr,dc"`` text too), or each drawing its pair at every reset."""
    chosen, per_task = vector_tasks(num_envs, pair, pairs)
    if chosen is not None:
        chosen = [parse_pair(p, int(size)) if isinstance(p, str) else p for p in chosen]
    return KeyDoorVectorEnv(chosen, per_task, size, max_episode_steps, random_start, observe_key)


def eval_kwargs(metadata: dict[str, Any], tasks: Sequence[str]) -> dict[str, Any]:
    """The ``gymnasium.make_vec`` kwargs that play ``tasks`` (task ids) with a dataset's recorded env settings (its
    ``task_spec``; the agent observes its cell only): what ``ad eval`` builds its envs from."""
    spec, size, pairs = room_tasks(metadata, tasks, parse_task_name)
    return {"size": size, "pairs": pairs, "max_episode_steps": int(spec.get("episode_length", 50)),
            "random_start": bool(spec.get("random_start", False))}
