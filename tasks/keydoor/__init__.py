"""Dark Key-to-Door (the Algorithm Distillation paper's second environment): a task is an ordered pair of cells of a
9x9 room, the key and the door (reward 1 on first reaching the key, 1 on reaching the door with it, which ends the
episode; 50 steps; the agent observes its cell only). Importing this package registers the gymnasium ids
(``ad/DarkKeyToDoor-9x9-v0`` ...) and the task family; torch is imported only when a command runs.
"""
from __future__ import annotations

from tasks.grid.family import register_grid_family
from tasks.keydoor.config import GenerateConfig
from tasks.keydoor.demo import KeyDoorDemoConfig

#: gymnasium ids registered here (the one place): id -> (size, max_episode_steps). The pair is drawn at every
#: reset unless ``pair=`` is passed.
GYM_IDS = {"ad/DarkKeyToDoor-9x9-v0": (9, 50), "ad/DarkKeyToDoor-3x3-v0": (3, 20)}

register_grid_family("keydoor", "tasks.keydoor", "KeyDoorEnv", GYM_IDS, {"random_start": False},
                     "A2C learning histories on Dark Key-to-Door tasks (key/door pairs, all batched)", GenerateConfig,
                     KeyDoorDemoConfig)
