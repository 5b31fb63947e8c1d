"""The single k-armed bandit (gymnasium ``Env``): one pull is one step and one whole episode.

Action: the arm. Reward: a Bernoulli draw with the arm's mean (``kind="bernoulli"``), or the mean plus Gaussian
noise of std ``noise_std`` (``kind="gaussian"``); one draw per step, as the vectorised env
(:mod:`tasks.bandit.vector_env`) draws it. Observation: ``"last-pull"`` (default) is the outcome of the previous
pull (Bernoulli: the index ``1 + 2 * arm + reward``; Gaussian: ``[one_hot(arm), reward * one_hot(arm)]``; 0 /
zeros before the first pull; :func:`tasks.bandit.instances.pull_observations`), ``"none"`` a constant 0.
``means=None`` draws an instance (means from U(0, 1)) at the first reset and at every reset given a ``seed`` or
``options={"new_instance": True}``, which starts a new run; the autoreset before the next pull keeps it.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tasks.bandit.instances import KINDS, OBSERVATIONS, check_arms, pull_observations


def observation_space(arms: int, kind: str, observation: str) -> spaces.Space:
    """The observation space of one bandit env."""
    if observation == "none":
        return spaces.Discrete(1)
    if kind == "bernoulli":
        return spaces.Discrete(2 * arms + 1)
    low = np.concatenate([np.zeros(arms), np.full(arms, -np.inf)]).astype(np.float32)
    high = np.concatenate([np.ones(arms), np.full(arms, np.inf)]).astype(np.float32)
    return spaces.Box(low, high, dtype=np.float32)


class BanditEnv(gym.Env):
    """One k-armed bandit with fixed (or random) arm means."""

    metadata = {"render_modes": []}

    def __init__(self, arms: int = 5, kind: str = "bernoulli", means: Any = None, noise_std: float = 0.5,
                 observation: str = "last-pull"):
        check_arms(arms)
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, got {observation!r}")
        self.arms, self.kind, self.noise_std, self.observation = int(arms), kind, float(noise_std), observation
        self.fixed_means = None if means is None else np.asarray(means, dtype=np.float64).reshape(-1)
        if self.fixed_means is not None and len(self.fixed_means) != self.arms:
            raise ValueError(f"means has {len(self.fixed_means)} values for {self.arms} arms")
        self.means = self.fixed_means
        self.observation_space = observation_space(self.arms, kind, observation)
        self.action_space = spaces.Discrete(self.arms)
        self._last = self._first_obs()

    def _first_obs(self):
        if self.observation == "none" or self.kind == "bernoulli":
            return 0
        return np.zeros(2 * self.arms, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        new_run = self.means is None or seed is not None or bool((options or {}).get("new_instance"))
        if new_run:
            if self.fixed_means is None:
                self.means = self.np_random.uniform(0.0, 1.0, self.arms)
            self._last = self._first_obs()
        return self._last, {}

    def step(self, action):
        assert self.means is not None, "call reset() before step()"
        mean = float(self.means[int(action)])
        reward = (float(self.np_random.random() < mean) if self.kind == "bernoulli"
                  else mean + self.noise_std * float(self.np_random.standard_normal()))
        if self.observation != "none":
            self._last = pull_observations(np.array(int(action)), np.array(reward, dtype=np.float32), self.arms,
                                           self.kind)
            if self.kind == "bernoulli":
                self._last = int(self._last)
        return self._last, reward, True, False, {"arm_mean": mean}
