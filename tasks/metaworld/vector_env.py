"""Many ML1 goals of one skill stepped as one Gymnasium ``VectorEnv`` (same-step autoreset, fixed-length episodes).

Sub-env ``i`` plays goal ``goals[i // envs_per_task]``, a ``(split, index)`` pair of ``ML1(skill, ml1_seed)``; each
is a :class:`~tasks.metaworld.env.MetaWorldML1Env` (one MuJoCo model and data each). Episodes last
``episode_length`` steps and end truncated; the step that ends one puts its last observation in
``infos["final_obs"]`` and returns the first observation of the next (``AutoresetMode.SAME_STEP``, like
``tasks.bandit.vector_env``). ``infos["success"]`` holds every sub-env's success flag of the step.

MuJoCo steps one model at a time, so the sub-envs are stepped in a loop; what the vector env saves is everything
around it: no per-env wrapper stack, one array in and out per step, and a caller (the noise source) that computes
every sub-env's action in one numpy operation. :meth:`MetaWorldVectorEnv.set_goals` points the same sub-envs at other
goals, so a source can reuse the envs (building one loads a MuJoCo model, about 0.15 s) across blocks of tasks.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ad.errors import UserError
from tasks import vector_tasks
from tasks.metaworld.env import MetaWorldML1Env
from tasks.metaworld.skills import MAX_EPISODE_STEPS, check_goal, ml1_task, observable_task, parse_task_name

#: Steps per episode unless set: every ML1 goal of reach-v3, push-v3 and pick-place-v3 (100 each) is reached by
#: the scripted expert within 78 steps (see docs/experiments/metaworld.md).
DEFAULT_EPISODE_LENGTH = 100


class MetaWorldVectorEnv(VectorEnv):
    """``len(goals) * envs_per_task`` ML1 sub-envs of ``skill``, goal-major (sub-env i -> goals[i // envs_per_task])."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, skill: str, goals: Sequence[tuple[str, int]], envs_per_task: int = 1,
                 episode_length: int = DEFAULT_EPISODE_LENGTH, ml1_seed: int = 0):
        if not goals:
            raise ValueError("give at least one (split, goal index)")
        if not 1 <= int(episode_length) <= MAX_EPISODE_STEPS:
            raise ValueError(f"episode_length must be in 1..{MAX_EPISODE_STEPS}, got {episode_length}")
        self.skill, self.ml1_seed = skill, int(ml1_seed)
        self.envs_per_task, self.episode_length = int(envs_per_task), int(episode_length)
        flat = [(split, int(goal)) for split, goal in goals for _ in range(self.envs_per_task)]
        self.envs = [MetaWorldML1Env(skill, split, goal, self.ml1_seed) for split, goal in flat]
        self.goals = list(goals)
        self.num_envs = len(self.envs)
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.steps = np.zeros(self.num_envs, dtype=np.int64)  # steps into the current episode
        self._started = False

    def set_goals(self, goals: Sequence[tuple[str, int]]) -> None:
        """Point the sub-envs at other goals (as many as now); call :meth:`reset` before the next step."""
        if len(goals) * self.envs_per_task != self.num_envs:
            raise ValueError(f"give {self.num_envs // self.envs_per_task} goals, got {len(goals)}")
        for i, (split, goal) in enumerate(goals):
            task = observable_task(ml1_task(self.skill, split, check_goal(goal, split, "goal"), self.ml1_seed))
            for env in self.envs[i * self.envs_per_task:(i + 1) * self.envs_per_task]:
                env.split, env.goal = split, int(goal)
                env.mw_env.set_task(task)
        self.goals = list(goals)
        self._started = False

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        """Start a new episode in every sub-env (sub-env i seeded with ``seed + i``)."""
        seeds = [None] * self.num_envs if seed is None else (
            [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed))
        obs = np.stack([env.reset(seed=s)[0] for env, s in zip(self.envs, seeds)])
        self.steps[:] = 0
        self._started = True
        return obs, {}

    def step(self, actions):
        """One step of every sub-env; an episode that reaches ``episode_length`` ends and restarts in this call."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions, dtype=np.float32)
        if actions.shape != (self.num_envs, 4):
            raise ValueError(f"actions must have shape ({self.num_envs}, 4), got {actions.shape}")
        obs = np.empty((self.num_envs, *self.single_observation_space.shape))
        rewards = np.empty(self.num_envs, dtype=np.float64)
        success = np.empty(self.num_envs, dtype=bool)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        for i, env in enumerate(self.envs):
            obs[i], rewards[i], terminated[i], truncated[i], info = env.step(actions[i])
            success[i] = info["success"] > 0
        self.steps += 1
        truncated |= self.steps >= self.episode_length
        done = terminated | truncated
        infos: dict[str, Any] = {"success": success, "_success": np.ones(self.num_envs, dtype=bool)}
        if done.any():
            infos["final_obs"], infos["_final_obs"] = obs.copy(), done
            for i in np.flatnonzero(done):
                obs[i] = self.envs[i].reset()[0]
            self.steps[done] = 0
        return obs, rewards, terminated, truncated, infos

    def expert_observations(self) -> np.ndarray:
        """Every sub-env's last observation with the goal visible (E, 39): what a scripted expert reads, never a
        learner (after an autoreset: the new episode's first one)."""
        return np.stack([env.expert_observation() for env in self.envs])

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


def make_vector_env(num_envs: int = 1, skill: str = "reach-v3", split: str = "train", goal: int = 0,
                    goals: Sequence[int | tuple[str, int]] | None = None, ml1_seed: int = 0,
                    max_episode_steps: int = DEFAULT_EPISODE_LENGTH) -> MetaWorldVectorEnv:
    """The ``vector_entry_point`` of the registered id: ``num_envs`` copies of goal ``goal`` of ``split``, or the
    ``goals`` task-major (:func:`tasks.vector_tasks`; a goal is an index of ``split`` or a ``(split, index)``
    pair); episodes of ``max_episode_steps`` steps (Gymnasium passes the id's own)."""
    pairs = None if goals is None else [(split, g) if isinstance(g, (int, np.integer)) else (str(g[0]), int(g[1]))
                                        for g in goals]
    chosen, per_task = vector_tasks(num_envs, (split, goal), pairs)
    return MetaWorldVectorEnv(skill, chosen, envs_per_task=per_task, episode_length=int(max_episode_steps),
                              ml1_seed=ml1_seed)


def eval_kwargs(metadata: dict[str, Any], tasks: Sequence[str]) -> dict[str, Any]:
    """The ``gymnasium.make_vec`` kwargs that play ``tasks`` (``mw-<skill>-<split>-g<index>`` ids) with a dataset's
    recorded skill, ML1 seed and episode length (its ``task_spec``): what ``ad eval`` builds its envs from. Actions
    are ``Box(-1, 1, (4,))``; ``infos["success"]`` reports Meta-World's success flag."""
    spec = metadata.get("task_spec", {})
    skill = spec.get("skill")
    goals = []
    for name in tasks:
        task_skill, split, goal = parse_task_name(name)
        if task_skill != skill:
            raise UserError(f"task {name} is a {task_skill} goal but the dataset's skill is {skill}")
        goals.append((split, goal))
    return {"skill": skill, "goals": goals, "ml1_seed": int(spec.get("ml1_seed", 0)),
            "max_episode_steps": int(spec.get("episode_length") or DEFAULT_EPISODE_LENGTH)}
