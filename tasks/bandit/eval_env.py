"""Evaluation environments for bandit histories (``tasks.bandit`` registers :func:`make_eval_env`)."""
from __future__ import annotations

from typing import Any

from ad.errors import UserError
from ad.evaluate import EvalEnv
from tasks.bandit.instances import parse_task_name, task_means
from tasks.bandit.vector_env import BanditVectorEnv


def make_eval_env(metadata: dict[str, Any], tasks: list[str], envs_per_task: int = 1) -> EvalEnv:
    """One vectorised bandit over ``tasks`` x ``envs_per_task`` with the dataset's reward kind and noise.

    ``ad eval --episodes P`` then runs P pulls per env; each episode's return is one pull's reward, and the
    env's ``regret()`` gives the expected regret of every pull.
    """
    spec = metadata.get("task_spec", {})
    kind, arms = spec.get("kind", "bernoulli"), int(spec.get("arms", 0))
    for name in tasks:
        task_kind, task_arms, _ = parse_task_name(name)
        if (task_kind, task_arms) != (kind, arms):
            raise UserError(f"task {name} is a {task_arms}-armed {task_kind} bandit but the dataset's are "
                            f"{arms}-armed {kind} ones")
    means = task_means(list(tasks))  # (T, arms)
    env = BanditVectorEnv(means, envs_per_task=envs_per_task, kind=kind, noise_std=float(spec.get("noise_std") or 0.5),
                          observation=spec.get("observation", "none"))
    return EvalEnv(env, list(tasks), envs_per_task, means.max(axis=1), arms)
