"""The LunarLander task env (Gymnasium's ``LunarLander`` with checked kwargs) and its vector env over tasks.

``ad/LunarLander-v0`` is Gymnasium's discrete LunarLander (8 floats observed, 4 actions, 1000-step time limit) whose
kwargs are refused with a one-line error when out of Gymnasium's range; :func:`make_vector_env` (its
``vector_entry_point``) runs many tasks at once, sub-env ``i`` playing ``tasks[i // (num_envs // len(tasks))]``.
"""
from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium.envs.box2d.lunar_lander import LunarLander
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from ad.errors import UserError
from tasks.lunarlander.instances import check_kwargs

GYM_ID = "ad/LunarLander-v0"
EPISODE_LENGTH = 1000


class LunarLanderTask(LunarLander):
    """Gymnasium's LunarLander (discrete actions) with its task kwargs checked first (a UserError, not an assert);
    ``action_map`` (a permutation of 0..3) gives the Gymnasium action each of the agent's actions takes (swapped
    engines: the agent has to find out which action fires which engine)."""

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        kwargs = check_kwargs(kwargs, "LunarLander")
        self.action_map = kwargs.pop("action_map", None)
        super().__init__(render_mode=render_mode, continuous=False, **kwargs)

    def step(self, action: Any) -> Any:
        return super().step(action if self.action_map is None else self.action_map[int(action)])


def make_vector_env(num_envs: int = 1, tasks: list[dict[str, Any]] | None = None,
                    max_episode_steps: int = EPISODE_LENGTH, **kwargs: Any) -> SyncVectorEnv:
    """A same-step-autoreset vector env of ``num_envs`` LunarLanders: each sub-env plays one of ``tasks`` (kwargs
    per task; ``num_envs`` must be a multiple of their number, task-major), or every one ``kwargs``."""
    tasks = [dict(kwargs)] if tasks is None else [dict(t) for t in tasks]
    if not tasks or num_envs % len(tasks):
        raise UserError(f"num_envs {num_envs} must be a positive multiple of the {len(tasks)} tasks")
    per_task = num_envs // len(tasks)
    for i, task in enumerate(tasks):
        check_kwargs(task, f"task {i}")
    makers = [(lambda task=tasks[i // per_task]: gymnasium.make(GYM_ID, max_episode_steps=max_episode_steps, **task))
              for i in range(num_envs)]
    return SyncVectorEnv(makers, autoreset_mode=AutoresetMode.SAME_STEP)
