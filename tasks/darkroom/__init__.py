"""DarkRoom (the Algorithm Distillation paper's grid world) on the grid engine (:mod:`tasks.grid`).

Importing this package registers the gymnasium ids (``ad/DarkRoom-9x9-v0`` ...) and the task family
(``ad generate darkroom``, the evaluation env of ``ad eval``, ``ad demo --task darkroom``); torch is imported only when one of them runs (``ad --help`` imports this package).
"""
from __future__ import annotations

import gymnasium

from ad.families import TaskFamily, register_family
from ad.registry import lazy_function
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.demo import DarkRoomDemoConfig

#: gymnasium ids registered here (the one place): id -> (size, max_episode_steps).
GYM_IDS = {"ad/DarkRoom-9x9-v0": (9, 20), "ad/DarkRoom-3x3-v0": (3, 10)}

for _gym_id, (_size, _steps) in GYM_IDS.items():
    if _gym_id not in gymnasium.registry:
        gymnasium.register(id=_gym_id, entry_point="tasks.darkroom.env:DarkRoomEnv", max_episode_steps=_steps,
                           vector_entry_point="tasks.darkroom.vector_env:make_vector_env",
                           kwargs={"size": _size, "random_start": False, "terminate_on_goal": False})


register_family(TaskFamily(
    name="darkroom",
    summary="A2C learning histories on every DarkRoom goal (all goals batched)",
    generate_config=GenerateConfig,
    generate=lazy_function("tasks.darkroom.generate:generate"),
    gym_id="ad/DarkRoom-9x9-v0",
    eval_kwargs=lazy_function("tasks.darkroom.vector_env:eval_kwargs"),
    demo_config=DarkRoomDemoConfig,
    optimal_actions=lazy_function("tasks.darkroom.optimal:optimal_actions"),
    task_kwargs=("size",),
    default=True,
))
