"""LLM grid world (after LactChain): the env, an LLM actor constrained to the move vocabulary, a Monte-Carlo critic,
SimPO training, and ``ad generate gridworld``. Importing this package registers the gymnasium ids
(``ad/GridWorld-4x4-v0`` ...) and the CLI command; torch is imported only when the command runs.
"""
from __future__ import annotations

import gymnasium

from ad.registry import lazy_function, register
from tasks.gridworld.config import GenerateConfig

#: gymnasium ids registered here (the one place): id -> (size, max_episode_steps, clip_at_wall).
GYM_IDS = {"ad/GridWorld-4x4-v0": (4, 6, False), "ad/GridWorld-4x4-clip-v0": (4, 6, True),
           "ad/GridWorld-6x6-v0": (6, 8, False)}

for _gym_id, (_size, _steps, _clip) in GYM_IDS.items():
    if _gym_id not in gymnasium.registry:
        gymnasium.register(id=_gym_id, entry_point="tasks.gridworld.env:GridWorldEnv", max_episode_steps=_steps,
                           kwargs={"size": _size, "clip_at_wall": _clip})


register("generate", "gridworld", GenerateConfig, lazy_function("tasks.gridworld.generate:generate"),
         help="LLM actor in the grid world: Monte-Carlo critic, then SimPO; every episode logged as a history")
