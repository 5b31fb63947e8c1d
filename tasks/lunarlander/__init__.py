"""LunarLander ("moonlander"): a task distribution over Gymnasium's own gravity and wind kwargs, a batched PPO that
learns every task at once (or, ``--source noise``, Gymnasium's heuristic lander made epsilon-greedy), and ``ad
generate lunarlander``.

A task is one setting of ``gravity`` (in (-12, 0)), ``enable_wind``, ``wind_power`` (0..20) and ``turbulence_power``
(0..2) of the discrete-action LunarLander (8 observed floats, 4 actions); every task's optimal return is reported as
200, Gymnasium's "solved".

    ad generate lunarlander --out data/lunarlander [--tasks 16] [--steps 64000] [--streams 4] [--seed 0]
    ad train rl --data data/lunarlander --out runs/ll-ad --context 256 --subsample 4
    ad eval --ckpt runs/ll-ad --data data/lunarlander --episodes 10
    ad demo --task lunarlander

Importing this package registers the gymnasium id ``ad/LunarLander-v0`` (its ``vector_entry_point`` runs many tasks
in one vector env), the CLI command, the evaluation env of ``ad eval`` and the demo; nothing heavy (torch, Box2D) is
imported until one of them runs.
"""
from __future__ import annotations

import gymnasium

from ad.families import TaskFamily, register_family
from ad.registry import lazy_function
from tasks.lunarlander.config import GenerateConfig
from tasks.lunarlander.demo import LunarLanderDemoConfig

if "ad/LunarLander-v0" not in gymnasium.registry:
    gymnasium.register(id="ad/LunarLander-v0", entry_point="tasks.lunarlander.env:LunarLanderTask",
                       vector_entry_point="tasks.lunarlander.env:make_vector_env", max_episode_steps=1000)

register_family(TaskFamily(
    name="lunarlander",
    summary="batched PPO (or noisy heuristic lander) histories on LunarLander tasks over gravity and wind",
    generate_config=GenerateConfig,
    generate=lazy_function("tasks.lunarlander.generate:generate"),
    gym_id="ad/LunarLander-v0",  # each held-out task rebuilt from its recorded kwargs
    demo_config=LunarLanderDemoConfig,
    task_kwargs=("env_id",),
    optimal_actions=lazy_function("tasks.lunarlander.optimal:optimal_actions"),  # the heuristic lander's (DPT)
))
