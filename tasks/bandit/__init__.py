"""Bandits: k-armed Bernoulli and Gaussian bandits, UCB1 and Thompson sampling run vectorised over thousands of
instances, and ``ad generate bandit``.

A task is one instance (``bandit-bern5-i00123``: arm means fixed by the name); one pull is one transition and one
one-step episode. The optimum and the expected regret are exact (:mod:`tasks.bandit.instances`).
Importing this package registers the gymnasium ids (``ad/BernoulliBandit-v0``, ``ad/GaussianBandit-v0``), the CLI
command and the evaluation env of ``ad eval``; nothing heavy (torch) is imported until one of them runs.
"""
from __future__ import annotations

import gymnasium

from ad.families import TaskFamily, register_family
from ad.registry import lazy_function
from tasks.bandit.config import GenerateConfig
from tasks.bandit.demo import BanditDemoConfig

#: gymnasium ids registered here (the one place): id -> reward kind. Means are drawn from U(0, 1) at every reset
#: unless ``means=`` is passed; ``arms=`` sets their number (default 5).
GYM_IDS = {"ad/BernoulliBandit-v0": "bernoulli", "ad/GaussianBandit-v0": "gaussian"}

for _gym_id, _kind in GYM_IDS.items():
    if _gym_id not in gymnasium.registry:
        gymnasium.register(id=_gym_id, entry_point="tasks.bandit.env:BanditEnv",
                           vector_entry_point="tasks.bandit.vector_env:make_vector_env", kwargs={"kind": _kind})


register_family(TaskFamily(
    name="bandit",
    summary="UCB1 / Thompson-sampling histories on k-armed Bernoulli or Gaussian bandits (vectorised)",
    generate_config=GenerateConfig,
    generate=lazy_function("tasks.bandit.generate:generate"),
    gym_id="ad/BernoulliBandit-v0",  # eval_kwargs set the dataset's reward kind
    eval_kwargs=lazy_function("tasks.bandit.vector_env:eval_kwargs"),
    demo_config=BanditDemoConfig,
    optimal_actions=lazy_function("tasks.bandit.optimal:optimal_actions"),
    task_kwargs=("arms", "kind"),
))
