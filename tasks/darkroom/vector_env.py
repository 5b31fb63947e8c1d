"""A natively vectorised DarkRoom over (goals x parallel envs), in numpy.

Follows gymnasium's ``VectorEnv`` conventions: batched spaces, ``metadata["autoreset_mode"]``
(``SAME_STEP``: a finished sub-env is reset inside the same ``step``; its last observation is in
``infos["final_obs"]`` where ``infos["_final_obs"]`` is True). Sub-env ``i`` plays goal
``goals[i // envs_per_goal]``; ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i`` like
``SyncVectorEnv``, so it matches single :class:`~tasks.darkroom.env.DarkRoomEnv` copies wrapped in
``TimeLimit`` transition for transition. One step is a table lookup for all sub-envs at once. With ``goals=None``
every sub-env draws its goal at every reset from its own generator, as the single env without ``goal`` does.

:func:`make_vector_env` is the ``vector_entry_point`` of the gymnasium ids (``gymnasium.make_vec``).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ad.errors import UserError
from tasks import vector_tasks
from tasks.darkroom.goals import (NUM_ACTIONS, all_goals, check_size, optimal_return, parse_task_name, start_cell,
                                   transition_table)


class DarkRoomVectorEnv(VectorEnv):
    """``len(goals) * envs_per_goal`` DarkRoom sub-envs, goal-major (sub-env i -> goal i // envs_per_goal)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, goals: Sequence[tuple[int, int]] | None, envs_per_goal: int = 1, size: int = 9,
                 episode_length: int = 20, random_start: bool = False, terminate_on_goal: bool = False):
        """``goals=None``: ``envs_per_goal`` sub-envs, each drawing its goal at every reset."""
        check_size(size)
        self.size = int(size)
        self.random_goals = goals is None
        if self.random_goals:  # one row per sub-env, filled at every reset
            goals, envs_per_goal = np.zeros((int(envs_per_goal), 2), dtype=np.int64), 1
        self.goals = np.asarray(goals, dtype=np.int64).reshape(-1, 2)  # (G, 2)
        self.envs_per_goal = int(envs_per_goal)
        self.num_envs = len(self.goals) * self.envs_per_goal
        self.episode_length = int(episode_length)
        self.random_start = bool(random_start)
        self.terminate_on_goal = bool(terminate_on_goal)

        self.single_observation_space = spaces.Discrete(self.size * self.size)
        self.single_action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        self._next_cell = transition_table(self.size)  # (S, A)
        goal_cells = self.goals[:, 0] * self.size + self.goals[:, 1]  # (G,)
        self.goal_cell = np.repeat(goal_cells, self.envs_per_goal)  # (E,)
        row, col = start_cell(self.size)
        self._start = row * self.size + col
        self.cell = np.full(self.num_envs, self._start, dtype=np.int64)  # (E,) current observation
        self.elapsed = np.zeros(self.num_envs, dtype=np.int64)  # (E,) steps taken in the current episode
        self.episode = np.zeros(self.num_envs, dtype=np.int64)  # (E,) index of the current episode
        self._rngs: list[np.random.Generator] | None = None

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env; episode counters restart at 0."""
        if seed is not None or self._rngs is None:
            seeds = [None] * self.num_envs if seed is None else (
                [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed))
            assert len(seeds) == self.num_envs, "one seed per sub-env"
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
        self.elapsed[:] = 0
        self.episode[:] = 0
        self._restart(np.arange(self.num_envs))
        return self._observe(), {}

    def step(self, actions):
        """Move every sub-env; finished ones are reset in the same call (SAME_STEP autoreset)."""
        actions = np.asarray(actions, dtype=np.int64)
        self.cell = self._next_cell[self.cell, actions]  # (E,)
        rewards, terminations = self._rewards()  # (E,), (E,)
        self.elapsed += 1
        truncations = self.elapsed >= self.episode_length  # (E,) like TimeLimit: may be True with terminated
        done = terminations | truncations
        infos: dict[str, Any] = {}
        if done.any():
            infos["final_obs"] = self._observe()
            infos["_final_obs"] = done
            idx = np.flatnonzero(done)
            self._restart(idx)
            self.elapsed[idx] = 0
            self.episode[idx] += 1
        return self._observe(), rewards, terminations, truncations, infos

    @property
    def optimal(self) -> np.ndarray:
        """Each sub-env's optimal return on its goal (E,): what ``ad eval`` reports returns as a fraction of."""
        per_goal = [optimal_return(self.size, (int(r), int(c)), self.episode_length, self.terminate_on_goal,
                                   self.random_start) for r, c in self.goals]
        return np.repeat(np.asarray(per_goal, dtype=np.float64), self.envs_per_goal)

    # ------------------------------------------------------------------ task hooks (Key-to-Door overrides them)
    def _rewards(self) -> tuple[np.ndarray, np.ndarray]:
        """Rewards ``(E,)`` float32 and terminations ``(E,)`` bool of the move just made (``self.cell`` is new)."""
        rewards = (self.cell == self.goal_cell).astype(np.float32)  # (E,)
        terminations = rewards > 0 if self.terminate_on_goal else np.zeros(self.num_envs, dtype=bool)
        return rewards, terminations

    def _observe(self) -> np.ndarray:
        """The observation of every sub-env ``(E,)`` (a copy): its cell."""
        return self.cell.copy()

    def _restart(self, idx: np.ndarray) -> None:
        """Put the sub-envs ``idx`` at the start of a new episode (cells only; counters are the caller's)."""
        if self.random_goals:
            self._draw_tasks(idx)
        self.cell[idx] = self._start_cells(idx)

    def _draw_tasks(self, idx: np.ndarray) -> None:
        """New goals for the sub-envs ``idx`` (``goals=None``), each drawn as the single env draws it."""
        every = all_goals(self.size)
        for i in idx:
            self.goals[i] = every[int(self._rngs[i].integers(len(every)))]
            self.goal_cell[i] = self.goals[i, 0] * self.size + self.goals[i, 1]

    # ------------------------------------------------------------------ helpers
    def _start_cells(self, idx: np.ndarray) -> np.ndarray:
        """Start cells for the sub-envs ``idx`` (centre, or drawn from each sub-env's own generator)."""
        if not self.random_start:
            return np.full(len(idx), self._start, dtype=np.int64)
        cells = np.empty(len(idx), dtype=np.int64)
        for j, i in enumerate(idx):  # only with random_start: one draw per finished sub-env
            row, col = self._rngs[i].integers(0, self.size, size=2)
            cells[j] = int(row) * self.size + int(col)
        return cells


def make_vector_env(num_envs: int = 1, size: int = 9, goal: Sequence[int] | None = None,
                    goals: Sequence[Sequence[int]] | None = None, random_start: bool = False,
                    terminate_on_goal: bool = False, max_episode_steps: int = 20) -> DarkRoomVectorEnv:
    """The ``vector_entry_point`` of the gymnasium ids: ``num_envs`` sub-envs with the single env's settings, on
    ``goal``, on ``goals`` (:func:`tasks.vector_tasks`), or each drawing its goal at every reset; episodes of
    ``max_episode_steps`` steps (gymnasium passes the id's own)."""
    chosen, per_goal = vector_tasks(num_envs, goal, goals)
    return DarkRoomVectorEnv(chosen, per_goal, size, max_episode_steps, random_start, terminate_on_goal)


def room_tasks(metadata: dict[str, Any], tasks: Sequence[str],
               parse: Callable[[str], tuple[int, Any]]) -> tuple[dict[str, Any], int, list[Any]]:
    """(task_spec, room size, each task's parameter) of a grid dataset's tasks, ``parse(name) -> (size, parameter)``
    reading a task id; a UserError for a task of another room size than the dataset's."""
    spec = metadata.get("task_spec", {})
    size = int(spec.get("size", 9))
    params = []
    for name in tasks:
        task_size, param = parse(name)
        if task_size != size:
            raise UserError(f"task {name} is for a {task_size}x{task_size} room but the dataset's is {size}x{size}")
        params.append(param)
    return spec, size, params


def eval_kwargs(metadata: dict[str, Any], tasks: Sequence[str]) -> dict[str, Any]:
    """The ``gymnasium.make_vec`` kwargs that play ``tasks`` (task ids) with a dataset's recorded env settings (its
    ``task_spec``): what ``ad eval`` builds its envs from."""
    spec, size, goals = room_tasks(metadata, tasks, parse_task_name)
    return {"size": size, "goals": goals, "max_episode_steps": int(spec.get("episode_length", 20)),
            "random_start": bool(spec.get("random_start", False)),
            "terminate_on_goal": bool(spec.get("terminate_on_goal", False))}
