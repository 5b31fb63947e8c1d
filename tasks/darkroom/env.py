"""The single DarkRoom environment (gymnasium ``Env``), same dynamics as ``toymeta.dark_room.DarkRoom``.

The agent walks a dark ``size x size`` grid; it sees only its cell index ``row * size + col``.
Actions: 0 noop, 1 up (row-1), 2 right (col+1), 3 down (row+1), 4 left (col-1); moves are clipped
at the walls. After each move the reward is 1.0 if the agent stands on the goal, else 0.0. With
``terminate_on_goal`` the episode ends on the first reward. Episode length comes from gymnasium's
``TimeLimit`` (``max_episode_steps`` at registration, see ``tasks/darkroom/__init__.py``).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tasks.darkroom.goals import all_goals
from tasks.grid.room import NUM_ACTIONS, check_size, start_cell, transition_table


class DarkRoomEnv(gym.Env):
    """One DarkRoom task. ``goal=None`` draws a goal (any cell but the centre) at every reset."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, size: int = 9, goal: tuple[int, int] | None = None, random_start: bool = False,
                 terminate_on_goal: bool = False, render_mode: str | None = None):
        check_size(size)
        self.size = int(size)
        self.random_start = bool(random_start)
        self.terminate_on_goal = bool(terminate_on_goal)
        self.render_mode = render_mode
        self.fixed_goal = None if goal is None else (int(goal[0]), int(goal[1]))
        if self.fixed_goal is not None and not all(0 <= x < self.size for x in self.fixed_goal):
            raise ValueError(f"goal {goal} is outside the {size}x{size} grid")
        self.goal = self.fixed_goal
        self.observation_space = spaces.Discrete(self.size * self.size)
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self._next_cell = transition_table(self.size)  # (S, A)
        self._goals = all_goals(self.size)
        self.cell = -1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self.fixed_goal is None:
            self.goal = self._goals[int(self.np_random.integers(len(self._goals)))]
        if self.random_start:
            row, col = self.np_random.integers(0, self.size, size=2)
        else:
            row, col = start_cell(self.size)
        self.cell = int(row) * self.size + int(col)
        return self.cell, {}

    def step(self, action):
        assert self.cell >= 0, "call reset() before step()"
        self.cell = int(self._next_cell[self.cell, int(action)])
        reward = 1.0 if self.cell == self.goal[0] * self.size + self.goal[1] else 0.0
        terminated = bool(reward) and self.terminate_on_goal
        return self.cell, reward, terminated, False, {}

    def render(self):
        """An RGB image (size, size, 3): white floor, red goal, green agent."""
        if self.render_mode != "rgb_array":
            return None
        grid = np.full((self.size, self.size, 3), 255, dtype=np.uint8)
        grid[self.goal[0], self.goal[1]] = (255, 0, 0)
        row, col = divmod(self.cell, self.size)
        grid[row, col] = (0, 255, 0)
        return grid
