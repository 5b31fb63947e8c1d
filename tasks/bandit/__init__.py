"""Bandits: k-armed Bernoulli and Gaussian bandits, UCB1 and Thompson sampling run vectorised over thousands of
instances, and ``ad generate bandit``.

Importing this package registers the gymnasium ids (``ad/BernoulliBandit-v0``, ``ad/GaussianBandit-v0``), the CLI
command and the evaluation env of ``ad eval``; nothing heavy (torch) is imported until one of them runs.
"""
from __future__ import annotations

import gymnasium

from ad.lazy import lazy_function
from ad.registry import register, register_env_factory
from tasks.bandit.config import GenerateConfig

#: gymnasium ids registered here (the one place): id -> reward kind. Means are drawn from U(0, 1) at every reset
#: unless ``means=`` is passed; ``arms=`` sets their number (default 5).
GYM_IDS = {"ad/BernoulliBandit-v0": "bernoulli", "ad/GaussianBandit-v0": "gaussian"}

for _gym_id, _kind in GYM_IDS.items():
    if _gym_id not in gymnasium.registry:
        gymnasium.register(id=_gym_id, entry_point="tasks.bandit.env:BanditEnv",
                           vector_entry_point="tasks.bandit.vector_env:make_vector_env", kwargs={"kind": _kind})


register("generate", "bandit", GenerateConfig, lazy_function("tasks.bandit.generate:generate"),
         help="UCB1 / Thompson-sampling histories on k-armed Bernoulli or Gaussian bandits (vectorised)")
register_env_factory("bandit", lazy_function("tasks.bandit.eval_env:make_eval_env"))
