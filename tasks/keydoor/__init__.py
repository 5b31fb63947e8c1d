"""Dark Key-to-Door (the Algorithm Distillation paper's second environment), its batched A2C source and
``ad generate keydoor`` / ``ad demo --task keydoor``.

A task is an ordered pair of distinct cells of a 9x9 room, the key and the door: reward 1 on first reaching the
key, 1 on reaching the door with it (the episode ends), 50-step episodes; the agent observes its cell only.

    ad generate keydoor --out data/kd --tasks 960 --steps-per-task 120000 [--seed 0] [--heldout-fraction 0.1]
    ad train rl --data data/kd --out runs/kd-ad --context 200 --subsample 40 --batch-size 16 --max-steps 6000
    ad train rl --data data/kd --out runs/kd-ed --context 200 --expert-only --batch-size 16 --max-steps 600
    ad eval --ckpt runs/kd-ad --baseline runs/kd-ed --data data/kd --episodes 50
    ad demo --task keydoor                     # all of the above (tasks/keydoor/demo.py has the defaults)

Importing this package registers the gymnasium ids (``ad/DarkKeyToDoor-9x9-v0`` ...) and the task family; torch is
imported only when a command runs.
"""
from __future__ import annotations

import gymnasium

from ad.families import TaskFamily, register_family
from ad.registry import lazy_function
from tasks.keydoor.config import GenerateConfig
from tasks.keydoor.demo import KeyDoorDemoConfig

#: gymnasium ids registered here (the one place): id -> (size, max_episode_steps). The pair is drawn at every
#: reset unless ``pair=`` is passed.
GYM_IDS = {"ad/DarkKeyToDoor-9x9-v0": (9, 50), "ad/DarkKeyToDoor-3x3-v0": (3, 20)}

for _gym_id, (_size, _steps) in GYM_IDS.items():
    if _gym_id not in gymnasium.registry:
        gymnasium.register(id=_gym_id, entry_point="tasks.keydoor.env:KeyDoorEnv", max_episode_steps=_steps,
                           vector_entry_point="tasks.keydoor.vector_env:make_vector_env",
                           kwargs={"size": _size, "random_start": False})

register_family(TaskFamily(
    name="keydoor",
    summary="A2C learning histories on Dark Key-to-Door tasks (key/door pairs, all batched)",
    generate_config=GenerateConfig,
    generate=lazy_function("tasks.keydoor.generate:generate"),
    gym_id="ad/DarkKeyToDoor-9x9-v0",
    eval_kwargs=lazy_function("tasks.keydoor.vector_env:eval_kwargs"),
    demo_config=KeyDoorDemoConfig,
    optimal_actions=lazy_function("tasks.keydoor.optimal:optimal_actions"),
    task_kwargs=("size",),
))
