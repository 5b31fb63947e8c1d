"""Bandits' optimal actions (the family contract's ``optimal_actions``): the instance's best arm, at every pull."""
from __future__ import annotations

import numpy as np

from tasks.bandit.instances import arm_means, parse_task_name


def optimal_actions(metadata: dict, task: str, stream: dict) -> np.ndarray:
    """The best arm of instance ``task`` (its arm means follow from its name), repeated over the stream's (T,)
    rows, int64. ``metadata`` is unused."""
    kind, arms, index = parse_task_name(task)
    best = int(np.argmax(arm_means(kind, arms, index)))
    return np.full(len(stream["state"]), best, dtype=np.int64)
