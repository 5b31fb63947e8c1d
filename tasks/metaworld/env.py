"""One Meta-World ML1 goal as a Gymnasium env, the goal hidden from the observation as ML1 hides it.

Observation: Meta-World's 39 numbers (hand position, gripper opening, object poses, the same 18 of the previous
step, then the goal position), with the goal's three entries zero: exactly what ML1's partially observable env
returns. Action: ``Box(-1, 1, (4,))`` (hand displacement and gripper effort). Reward: Meta-World's (0 to 10).
``info["success"]`` is Meta-World's success flag of the step (1.0 once the skill's goal is reached); Meta-World
never terminates an episode, so ``terminated`` is always False and episodes end by truncation (Meta-World's own
limit is :data:`~tasks.metaworld.skills.MAX_EPISODE_STEPS`; the registered ids shorten it with
``max_episode_steps``). Every episode of a task starts from the same state (Meta-World fixes a task's object and
goal positions), so ``reset(seed=...)`` changes nothing but the Gymnasium generator.

:meth:`MetaWorldML1Env.expert_observation` is the last observation with the goal visible, for a scripted expert
(privileged information: what a learner must not see).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tasks.metaworld.skills import SPLITS, make_skill_env, ml1_task, observable_task

#: Entries of the observation that hold the goal position (zeros in what ML1 and this env return).
GOAL = slice(-3, None)


def hidden_goal_space(space: spaces.Box) -> spaces.Box:
    """Meta-World's observation space with the goal entries' bounds set to 0 (as ML1's partially observable env
    declares them)."""
    low, high = space.low.copy(), space.high.copy()
    low[GOAL], high[GOAL] = 0.0, 0.0
    return spaces.Box(low, high, dtype=space.dtype)


class MetaWorldML1Env(gym.Env):
    """ML1 goal ``goal`` of ``split`` ("train" or "test") for ``skill``, goals drawn by ``ML1(skill, ml1_seed)``."""

    metadata = {"render_modes": []}

    def __init__(self, skill: str = "reach-v3", split: str = "train", goal: int = 0, ml1_seed: int = 0):
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.skill, self.split, self.goal, self.ml1_seed = skill, split, int(goal), int(ml1_seed)
        self.mw_env = make_skill_env(skill, self.ml1_seed)
        self.mw_env.set_task(observable_task(ml1_task(skill, split, self.goal, self.ml1_seed)))
        self.observation_space = hidden_goal_space(self.mw_env.sawyer_observation_space)
        self.action_space = spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
        self._full: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        full, info = self.mw_env.reset()
        return self._observe(full), dict(info)

    def step(self, action):
        assert self._full is not None, "call reset() before step()"
        full, reward, terminated, truncated, info = self.mw_env.step(np.asarray(action, dtype=np.float32))
        info = dict(info)
        info["success"] = float(info.get("success", 0.0))
        return self._observe(full), float(reward), bool(terminated), bool(truncated), info

    def _observe(self, full: np.ndarray) -> np.ndarray:
        self._full = np.asarray(full, dtype=np.float64)
        obs = self._full.copy()
        obs[GOAL] = 0.0
        return obs

    def expert_observation(self) -> np.ndarray:
        """The last observation with the goal position visible (what Meta-World's scripted experts read)."""
        assert self._full is not None, "call reset() before expert_observation()"
        return self._full.copy()

    def close(self) -> None:
        self.mw_env.close()
