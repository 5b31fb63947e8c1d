"""Evaluation environments for Key-to-Door histories (``tasks.keydoor`` registers :func:`make_eval_env`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.errors import UserError
from ad.evaluate import EvalEnv
from tasks.darkroom.goals import NUM_ACTIONS
from tasks.keydoor.pairs import optimal_return, parse_task_name
from tasks.keydoor.vector_env import KeyDoorVectorEnv


def make_eval_env(metadata: dict[str, Any], tasks: list[str], envs_per_task: int = 1) -> EvalEnv:
    """One vectorised Key-to-Door over ``tasks`` x ``envs_per_task`` with the dataset's env settings; the agent
    observes its cell only. ``optimal`` is each task's exact optimal return (2.0 when both are reachable)."""
    spec = metadata.get("task_spec", {})
    size = int(spec.get("size", 9))
    pairs = []
    for name in tasks:
        task_size, pair = parse_task_name(name)
        if task_size != size:
            raise UserError(f"task {name} is for a {task_size}x{task_size} room but the dataset's is {size}x{size}")
        pairs.append(pair)
    length, random_start = int(spec.get("episode_length", 50)), bool(spec.get("random_start", False))
    env = KeyDoorVectorEnv(pairs, envs_per_task, size, length, random_start)
    optimal = np.array([optimal_return(size, p, length, random_start) for p in pairs])
    return EvalEnv(env, list(tasks), envs_per_task, optimal, NUM_ACTIONS)
