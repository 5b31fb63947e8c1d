"""Any Gymnasium env as a task family: ``ad generate gym`` trains a Stable-Baselines3 algorithm on every task of a
distribution over one env (a task = the env id + kwargs, from a tasks file) and records each run's whole learning
history through :mod:`ad.record`; ``ad eval`` rebuilds the held-out tasks' envs from the recorded id and kwargs.

    ad generate gym --env LunarLander-v3 --tasks configs/lunarlander/tasks.yaml --algo sb3:PPO --steps 200000
    ad train rl --data data/gym --out runs/gym ; ad eval --ckpt runs/gym --data data/gym

Importing this package registers the command and the evaluation env; nothing heavy is imported until one runs.
"""
from __future__ import annotations

from ad.families import TaskFamily, register_family
from ad.registry import lazy_function
from tasks.gym.config import GymGenerateConfig

register_family(TaskFamily(
    name="gym",
    summary="any Gymnasium env: a Stable-Baselines3 algorithm (PPO, A2C, SAC, DQN) on a task distribution, recorded",
    generate_config=GymGenerateConfig,
    generate=lazy_function("tasks.gym.generate:generate"),
    eval_kwargs=lazy_function("ad.evaluate:recorded_kwargs"),  # any id: one env per task's kwargs
))
