"""Environments and source RL algorithms that produce learning histories (one folder per task), and what the
families' ``vector_entry_point`` functions share: :func:`vector_tasks` (``num_envs`` sub-envs laid over tasks,
task-major, as ``ad eval`` builds held-out envs with ``gymnasium.make_vec``) and :func:`sub_env_generators` (their
seeds).
"""
from __future__ import annotations

from typing import Any, Sequence


def vector_tasks(num_envs: int, task: Any, tasks: Sequence[Any] | None) -> tuple[list[Any] | None, int]:
    """(tasks, sub-envs per task) of a ``vector_entry_point`` call: ``num_envs`` copies of ``task``, or ``tasks``
    task-major (``num_envs`` a multiple of their number, or 1 for one sub-env each), or with neither (None,
    ``num_envs``): every sub-env draws its own."""
    if tasks is not None:
        tasks = list(tasks)
        if not tasks or num_envs != 1 and num_envs % len(tasks):
            raise ValueError(f"num_envs={num_envs} with {len(tasks)} tasks: give 1 or a multiple of their number")
        return tasks, max(1, num_envs // len(tasks))
    return (None, num_envs) if task is None else ([task], num_envs)


def sub_env_generators(seed: int | Sequence[int] | None, num_envs: int) -> list[Any]:
    """One numpy generator per sub-env, seeded as ``SyncVectorEnv`` seeds its envs: ``seed + i`` for an int, one
    seed each for a sequence, fresh entropy for None (what a vector env's ``reset(seed=...)`` does)."""
    from gymnasium.utils import seeding

    seeds = [None] * num_envs if seed is None else (
        [seed + i for i in range(num_envs)] if isinstance(seed, int) else list(seed))
    if len(seeds) != num_envs:
        raise ValueError(f"{len(seeds)} seeds for {num_envs} sub-envs: give one seed per sub-env")
    return [seeding.np_random(s)[0] for s in seeds]
