"""DarkRoom (the Algorithm Distillation paper's grid world), its batched A2C source, and ``ad generate darkroom``.

Importing this package registers the gymnasium ids (``ad/DarkRoom-9x9-v0`` ...), the CLI command and the
evaluation env of ``ad eval``; torch is imported only when one of them runs (``ad --help`` imports this package).
"""
from __future__ import annotations

import gymnasium

from ad.lazy import lazy_function
from ad.registry import register, register_env_factory
from tasks.darkroom.config import GenerateConfig

#: gymnasium ids registered here (the one place): id -> (size, max_episode_steps).
GYM_IDS = {"ad/DarkRoom-9x9-v0": (9, 20), "ad/DarkRoom-3x3-v0": (3, 10)}

for _gym_id, (_size, _steps) in GYM_IDS.items():
    if _gym_id not in gymnasium.registry:
        gymnasium.register(id=_gym_id, entry_point="tasks.darkroom.env:DarkRoomEnv", max_episode_steps=_steps,
                           kwargs={"size": _size, "random_start": False, "terminate_on_goal": False})


register("generate", "darkroom", GenerateConfig, lazy_function("tasks.darkroom.generate:generate"),
         help="A2C learning histories on every DarkRoom goal (all goals batched)")
register_env_factory("darkroom", lazy_function("tasks.darkroom.eval_env:make_eval_env"))
