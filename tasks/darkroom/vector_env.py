"""A natively vectorised DarkRoom over (goals x parallel envs), in numpy: the shared grid room
(:class:`tasks.grid.room.GridVectorEnv`) rewarded on the goal.

Sub-env ``i`` plays goal ``goals[i // envs_per_goal]`` and matches single :class:`~tasks.darkroom.env.DarkRoomEnv`
copies wrapped in ``TimeLimit`` transition for transition; with ``goals=None`` every sub-env draws its goal at every
reset, as the single env without ``goal`` does. :func:`make_vector_env` is the ``vector_entry_point`` of the ids.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tasks import vector_tasks
from tasks.darkroom.goals import all_goals, optimal_return, parse_task_name
from tasks.grid.room import GridVectorEnv, room_tasks


class DarkRoomVectorEnv(GridVectorEnv):
    """``len(goals) * envs_per_goal`` DarkRoom sub-envs, goal-major (sub-env i -> goal i // envs_per_goal): reward
    1 on the goal (the episode ends there with ``terminate_on_goal``)."""

    @property
    def optimal(self) -> np.ndarray:
        """Each sub-env's optimal return on its goal (E,): what ``ad eval`` reports returns as a fraction of."""
        per_goal = [optimal_return(self.size, (int(r), int(c)), self.episode_length, self.terminate_on_goal,
                                   self.random_start) for r, c in self.goals]
        return np.repeat(np.asarray(per_goal, dtype=np.float64), self.envs_per_goal)

    def _rewards(self) -> tuple[np.ndarray, np.ndarray]:
        rewards = (self.cell == self.goal_cell).astype(np.float32)  # (E,)
        terminations = rewards > 0 if self.terminate_on_goal else np.zeros(self.num_envs, dtype=bool)
        return rewards, terminations

    def _draw_tasks(self, idx: np.ndarray) -> None:
        every = all_goals(self.size)
        for i in idx:
            self.goals[i] = every[int(self._rngs[i].integers(len(every)))]
            self.goal_cell[i] = self.goals[i, 0] * self.size + self.goals[i, 1]


def make_vector_env(num_envs: int = 1, size: int = 9, goal: Sequence[int] | None = None,
                    goals: Sequence[Sequence[int]] | None = None, random_start: bool = False,
                    terminate_on_goal: bool = False, max_episode_steps: int = 20) -> DarkRoomVectorEnv:
    """The ``vector_entry_point`` of the gymnasium ids: ``num_envs`` sub-envs on ``goal``, on ``goals``
    (:func:`tasks.vector_tasks`), or each drawing its goal at every reset, episodes of ``max_episode_steps`` steps."""
    chosen, per_goal = vector_tasks(num_envs, goal, goals)
    return DarkRoomVectorEnv(chosen, per_goal, size, max_episode_steps, random_start, terminate_on_goal)


def eval_kwargs(metadata: dict[str, Any], tasks: Sequence[str]) -> dict[str, Any]:
    """The ``gymnasium.make_vec`` kwargs that play ``tasks`` (task ids) with a dataset's recorded env settings (its
    ``task_spec``): what ``ad eval`` builds its envs from."""
    spec, size, goals = room_tasks(metadata, tasks, parse_task_name)
    return {"size": size, "goals": goals, "max_episode_steps": int(spec.get("episode_length", 20)),
            "random_start": bool(spec.get("random_start", False)),
            "terminate_on_goal": bool(spec.get("terminate_on_goal", False))}
