"""A natively vectorised k-armed bandit over (instances x parallel envs), in numpy.

Follows gymnasium's ``VectorEnv`` conventions (batched spaces, ``autoreset_mode`` SAME_STEP): every step
terminates every sub-env's one-step episode, puts the last observation in ``infos["final_obs"]`` and starts the
next. Sub-env ``i`` plays ``means[i // envs_per_task]``; ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i``, and
each sub-env draws exactly what a single :class:`~tasks.bandit.env.BanditEnv` draws (its reward noise drawn ahead
in blocks), so the two agree pull for pull. ``infos["arm_mean"]`` holds the chosen arms' means, and
:meth:`BanditVectorEnv.regret` the exact expected regret of the run since the last reset.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ad.errors import UserError
from tasks import sub_env_generators, vector_tasks
from tasks.bandit.env import observation_space
from tasks.bandit.instances import KINDS, OBSERVATIONS, check_arms, parse_task_name, pull_observations, task_means

#: Pulls' worth of reward noise drawn per sub-env generator call.
_DRAW_BLOCK = 256


class BanditVectorEnv(VectorEnv):
    """``len(means) * envs_per_task`` bandit sub-envs, task-major (sub-env i -> instance i // envs_per_task)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, means: Any = None, envs_per_task: int = 1, kind: str = "bernoulli", noise_std: float = 0.5,
                 arms: int | None = None, observation: str = "last-pull"):
        """``means``: (tasks, arms) arm means, or None for a random instance per sub-env (then ``arms`` arms and
        ``envs_per_task`` sub-envs)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, got {observation!r}")
        self.kind, self.noise_std, self.observation = kind, float(noise_std), observation
        self.envs_per_task = int(envs_per_task)
        self.random_means = means is None
        if self.random_means:
            check_arms(arms or 0)
            self.task_means = np.full((self.envs_per_task, int(arms)), np.nan)  # drawn at reset
            self.envs_per_task = 1
        else:
            self.task_means = np.asarray(means, dtype=np.float64)  # (T, arms)
            if self.task_means.ndim != 2 or self.task_means.shape[1] < 2:
                raise ValueError(f"means must be (tasks, arms >= 2), got shape {self.task_means.shape}")
        self.arms = self.task_means.shape[1]
        self.means = np.repeat(self.task_means, self.envs_per_task, axis=0)  # (E, arms)
        self.num_envs = len(self.means)

        self.single_observation_space = observation_space(self.arms, kind, observation)
        self.single_action_space = spaces.Discrete(self.arms)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        self.chosen_means: list[np.ndarray] = []  # one (E,) array per step since the last reset
        self._rngs: list[np.random.Generator] | None = None
        self._noise = np.zeros((self.num_envs, 0))  # (E, B) noise drawn ahead
        self._used = 0  # columns of _noise consumed

    @property
    def optimal(self) -> np.ndarray:
        """Expected reward of each sub-env's best arm (E,)."""
        return self.means.max(axis=1)

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env (a new run: ``chosen_means`` empties)."""
        if seed is not None or self._rngs is None:
            self._rngs = sub_env_generators(seed, self.num_envs)
            self._noise, self._used = np.zeros((self.num_envs, 0)), 0
            if self.random_means:  # drawn first, as the single env draws them
                self.means = np.stack([rng.uniform(0.0, 1.0, self.arms) for rng in self._rngs])
        self.chosen_means = []
        return self._observe(None, None), {}

    def step(self, actions):
        """Pull one arm in every sub-env; every episode ends and restarts in this call (SAME_STEP)."""
        if self._rngs is None:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (self.num_envs,) or actions.min() < 0 or actions.max() >= self.arms:
            raise ValueError(f"actions must be {self.num_envs} arms in 0..{self.arms - 1}")
        mean = self.means[np.arange(self.num_envs), actions]  # (E,)
        noise = self._next_noise()  # (E,)
        rewards = ((noise < mean) if self.kind == "bernoulli" else mean + self.noise_std * noise).astype(np.float32)
        self.chosen_means.append(mean)
        obs = self._observe(actions, rewards)
        done = np.ones(self.num_envs, dtype=bool)
        infos = {"final_obs": obs.copy(), "_final_obs": done, "arm_mean": mean, "_arm_mean": done}
        return obs, rewards, done, np.zeros(self.num_envs, dtype=bool), infos

    def _observe(self, actions: np.ndarray | None, rewards: np.ndarray | None) -> np.ndarray:
        """Observations (E,) or (E, 2 * arms) after these pulls (None: a reset, before any pull)."""
        if self.observation == "none":
            return np.zeros(self.num_envs, dtype=np.int64)
        if actions is None:
            shape = (self.num_envs,) if self.kind == "bernoulli" else (self.num_envs, 2 * self.arms)
            return np.zeros(shape, dtype=np.int64 if self.kind == "bernoulli" else np.float32)
        return pull_observations(actions, rewards, self.arms, self.kind)

    def _next_noise(self) -> np.ndarray:
        """The next noise draw (uniform or standard normal) of every sub-env's own generator."""
        if self._used == self._noise.shape[1]:
            draw = "random" if self.kind == "bernoulli" else "standard_normal"
            self._noise = np.stack([getattr(rng, draw)(_DRAW_BLOCK) for rng in self._rngs])  # (E, B)
            self._used = 0
        self._used += 1
        return self._noise[:, self._used - 1]

    def regret(self) -> np.ndarray:
        """Expected regret of every pull since the last reset: (E, steps)."""
        if not self.chosen_means:
            return np.zeros((self.num_envs, 0))
        return self.optimal[:, None] - np.stack(self.chosen_means, axis=1)


def make_vector_env(num_envs: int = 1, arms: int = 5, kind: str = "bernoulli", means: Any = None,
                    noise_std: float = 0.5, observation: str = "last-pull") -> BanditVectorEnv:
    """The ``vector_entry_point`` of the gymnasium ids: ``num_envs`` sub-envs on one instance's ``means`` (arms,), on
    many instances' (tasks, arms) task-major (:func:`tasks.vector_tasks`), or each on a random instance."""
    if means is None:
        return BanditVectorEnv(None, envs_per_task=num_envs, kind=kind, noise_std=noise_std, arms=arms,
                               observation=observation)
    means = np.asarray(means, dtype=np.float64)
    chosen, per_task = (vector_tasks(num_envs, None, list(means)) if means.ndim == 2 else
                        vector_tasks(num_envs, means.reshape(-1), None))
    return BanditVectorEnv(np.stack(chosen), envs_per_task=per_task, kind=kind, noise_std=noise_std,
                           observation=observation)


def eval_kwargs(metadata: dict[str, Any], tasks: Sequence[str]) -> dict[str, Any]:
    """The ``gymnasium.make_vec`` kwargs that play ``tasks`` (instance ids, whose names fix their arm means) with a
    dataset's recorded reward kind, noise and observation: what ``ad eval`` builds its envs from."""
    spec = metadata.get("task_spec", {})
    kind, arms = spec.get("kind", "bernoulli"), int(spec.get("arms", 0))
    for name in tasks:
        task_kind, task_arms, _ = parse_task_name(name)
        if (task_kind, task_arms) != (kind, arms):
            raise UserError(f"task {name} is a {task_arms}-armed {task_kind} bandit but the dataset's are "
                            f"{arms}-armed {kind} ones")
    return {"means": task_means(list(tasks)), "kind": kind, "arms": arms,
            "noise_std": float(spec.get("noise_std") or 0.5), "observation": spec.get("observation", "none")}
