"""LunarLander's expert actions, the family contract's ``optimal_actions`` (DPT's target): Gymnasium's heuristic
lander at each recorded state, as the agent's action that fires that engine on the task (its ``action_map``). The
heuristic lands on the family's tasks (returns of about 200-320) but is not an optimal policy: DPT trained on these
targets imitates it."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from tasks.lunarlander.instances import ENGINES


@lru_cache(maxsize=1)
def _probe() -> Any:
    """One LunarLander (the heuristic reads only whether actions are continuous: they are not here)."""
    from tasks.lunarlander.env import LunarLanderTask

    return LunarLanderTask()


def optimal_actions(metadata: dict, task: str, stream: dict) -> np.ndarray:
    """The heuristic lander's action at each of the stream's (T,) states on ``task``, through its engine map, int64."""
    from tasks.lunarlander.noise_generate import demonstrator_actions

    states = np.asarray(stream["state"], dtype=np.float64)  # (T, 8)
    action_map = metadata["tasks"][task]["kwargs"].get("action_map", list(ENGINES))
    inverse = np.broadcast_to(np.argsort(action_map), (len(states), len(ENGINES)))  # (T, 4)
    return demonstrator_actions([_probe()] * len(states), states, inverse).astype(np.int64)
