"""The single DarkRoom environment (gymnasium ``Env``), same dynamics as ``toymeta.dark_room.DarkRoom``.

The agent walks a dark ``size x size`` room (:mod:`tasks.grid.room`) and sees only its cell index. After each move
the reward is 1.0 if the agent stands on the goal, else 0.0; with ``terminate_on_goal`` the episode ends on the
first reward.
"""
from __future__ import annotations

import numpy as np

from tasks.darkroom.goals import all_goals
from tasks.grid.room import GridEnv, check_size


class DarkRoomEnv(GridEnv):
    """One DarkRoom task. ``goal=None`` draws a goal (any cell but the centre) at every reset."""

    def __init__(self, size: int = 9, goal: tuple[int, int] | None = None, random_start: bool = False,
                 terminate_on_goal: bool = False, render_mode: str | None = None):
        check_size(size)
        super().__init__(size, random_start, render_mode)
        self.terminate_on_goal = bool(terminate_on_goal)
        self.fixed_goal = None if goal is None else (int(goal[0]), int(goal[1]))
        if self.fixed_goal is not None and not all(0 <= x < self.size for x in self.fixed_goal):
            raise ValueError(f"goal {goal} is outside the {size}x{size} grid")
        self.goal = self.fixed_goal
        self._goals = all_goals(self.size)

    def _new_episode(self) -> None:
        if self.fixed_goal is None:
            self.goal = self._goals[int(self.np_random.integers(len(self._goals)))]

    def _reward(self) -> tuple[float, bool]:
        reward = 1.0 if self.cell == self.goal[0] * self.size + self.goal[1] else 0.0
        return reward, bool(reward) and self.terminate_on_goal

    def _paint(self, grid: np.ndarray) -> None:
        """The goal in red."""
        grid[self.goal[0], self.goal[1]] = (255, 0, 0)
