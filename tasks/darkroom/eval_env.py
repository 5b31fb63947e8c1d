"""Evaluation environments for DarkRoom histories (``tasks.darkroom`` registers :func:`make_eval_env`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.errors import UserError
from ad.evaluate import EvalEnv
from tasks.darkroom.goals import NUM_ACTIONS, optimal_return, parse_task_name
from tasks.darkroom.vector_env import DarkRoomVectorEnv


def make_eval_env(metadata: dict[str, Any], tasks: list[str], envs_per_task: int = 1) -> EvalEnv:
    """One vectorised DarkRoom over ``tasks`` x ``envs_per_task`` with the dataset's env settings."""
    spec = metadata.get("task_spec", {})
    size = int(spec.get("size", 9))
    goals = []
    for name in tasks:
        goal_size, goal = parse_task_name(name)
        if goal_size != size:
            raise UserError(f"task {name} is for a {goal_size}x{goal_size} room but the dataset's is {size}x{size}")
        goals.append(goal)
    kwargs = {"size": size, "episode_length": int(spec.get("episode_length", 20)),
              "random_start": bool(spec.get("random_start", False)),
              "terminate_on_goal": bool(spec.get("terminate_on_goal", False))}
    env = DarkRoomVectorEnv(goals, envs_per_goal=envs_per_task, **kwargs)
    optimal = np.array([optimal_return(size, g, kwargs["episode_length"], kwargs["terminate_on_goal"],
                                       kwargs["random_start"]) for g in goals])
    return EvalEnv(env, list(tasks), envs_per_task, optimal, NUM_ACTIONS)

