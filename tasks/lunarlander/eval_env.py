"""Evaluation envs for LunarLander datasets: the held-out tasks rebuilt from the kwargs recorded in the dataset."""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.errors import UserError
from ad.evaluate import EvalEnv
from tasks.lunarlander.env import make_vector_env
from tasks.lunarlander.instances import SOLVED


def make_eval_env(metadata: dict[str, Any], tasks: list[str], envs_per_task: int = 1) -> EvalEnv:
    """One same-step-autoreset vector env over ``tasks`` x ``envs_per_task``, each task with its recorded kwargs;
    every task's optimal return is 200 (Gymnasium's "solved"), so returns are reported as a fraction of it."""
    known = metadata.get("tasks", {})
    missing = [t for t in tasks if "kwargs" not in known.get(t, {})]
    if missing:
        raise UserError(f"the dataset does not record the kwargs of {missing[:3]}; regenerate it with "
                        "`ad generate lunarlander`")
    env = make_vector_env(len(tasks) * envs_per_task, [known[t]["kwargs"] for t in tasks])
    optimal = np.array([float(known[t].get("optimal_return") or SOLVED) for t in tasks])
    return EvalEnv(env, list(tasks), envs_per_task, optimal, int(env.single_action_space.n))
