"""Evaluation envs for ``ad generate gym`` datasets: the held-out tasks rebuilt from the recorded env id and kwargs."""
from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from ad.errors import UserError
from ad.evaluate import EvalEnv
from tasks.gym.envs import make_env


def make_eval_env(metadata: dict[str, Any], tasks: list[str], envs_per_task: int = 1) -> EvalEnv:
    """One same-step-autoreset vector env over ``tasks`` x ``envs_per_task``, each sub-env built with its task's
    kwargs; a task's optimal return is the tasks file's ``reference_return`` (NaN where it gave none)."""
    spec, known = metadata.get("task_spec", {}), metadata.get("tasks", {})
    env_id = spec.get("env_id")
    missing = [t for t in tasks if t not in known]
    if not env_id or missing:
        raise UserError(f"the dataset does not record how to build {missing[:3] or 'its envs'}; regenerate it with "
                        "`ad generate gym`")
    action_space = spec.get("action_space", {})
    if action_space.get("type") not in ("Discrete", "Box"):
        raise UserError(f"in-context evaluation acts with Discrete or Box actions; this dataset's action space is "
                        f"{action_space.get('type')} ({env_id})")
    makers = [(lambda kwargs=known[t]["kwargs"], t=t: make_env(env_id, kwargs, t)) for t in tasks
              for _ in range(envs_per_task)]
    env = gymnasium.vector.SyncVectorEnv(makers, autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
    optimal = np.array([np.nan if known[t].get("optimal_return") is None else float(known[t]["optimal_return"])
                        for t in tasks])
    if action_space["type"] == "Box":
        return EvalEnv(env, list(tasks), envs_per_task, optimal, 0, env.single_action_space)
    return EvalEnv(env, list(tasks), envs_per_task, optimal, int(action_space["n"]))
