"""Evaluation envs for Meta-World datasets (``tasks.metaworld`` registers :func:`make_eval_env`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.errors import UserError
from ad.evaluate import EvalEnv
from tasks.metaworld.skills import parse_task_name
from tasks.metaworld.vector_env import DEFAULT_EPISODE_LENGTH, MetaWorldVectorEnv


def make_eval_env(metadata: dict[str, Any], tasks: list[str], envs_per_task: int = 1) -> EvalEnv:
    """One :class:`MetaWorldVectorEnv` over ``tasks`` x ``envs_per_task`` with the dataset's skill, ML1 seed and
    episode length; a task's optimal return is the scripted expert's recorded return (NaN where not recorded).

    Actions are ``Box(-1, 1, (4,))``: ``num_actions`` is 0 and the env's ``single_action_space`` describes them.
    """
    spec, known = metadata.get("task_spec", {}), metadata.get("tasks", {})
    skill = spec.get("skill")
    goals = []
    for name in tasks:
        task_skill, split, goal = parse_task_name(name)
        if task_skill != skill:
            raise UserError(f"task {name} is a {task_skill} goal but the dataset's skill is {skill}")
        goals.append((split, goal))
    env = MetaWorldVectorEnv(skill, goals, envs_per_task=envs_per_task,
                             episode_length=int(spec.get("episode_length") or DEFAULT_EPISODE_LENGTH),
                             ml1_seed=int(spec.get("ml1_seed", 0)))
    optimal = np.array([float(known.get(t, {}).get("optimal_return") or np.nan) for t in tasks])
    return EvalEnv(env, list(tasks), envs_per_task, optimal, 0, env.single_action_space)
