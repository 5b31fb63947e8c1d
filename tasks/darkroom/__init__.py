"""DarkRoom (the Algorithm Distillation paper's grid world) on the grid engine (:mod:`tasks.grid`). Importing this
package registers the gymnasium ids (``ad/DarkRoom-9x9-v0`` ...) and the task family; torch is imported only when
one of its commands runs (``ad --help`` imports this package).
"""
from __future__ import annotations

from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.demo import DarkRoomDemoConfig
from tasks.grid.family import register_grid_family

#: gymnasium ids registered here (the one place): id -> (size, max_episode_steps).
GYM_IDS = {"ad/DarkRoom-9x9-v0": (9, 20), "ad/DarkRoom-3x3-v0": (3, 10)}

register_grid_family("darkroom", "tasks.darkroom", "DarkRoomEnv", GYM_IDS,
                     {"random_start": False, "terminate_on_goal": False},
                     "A2C learning histories on every DarkRoom goal (all goals batched)", GenerateConfig,
                     DarkRoomDemoConfig, default=True, posterior=True)
