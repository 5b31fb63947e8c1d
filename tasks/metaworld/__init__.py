"""Meta-World ML1: one robot-arm manipulation skill, Meta-World's own 50 training and 50 held-out goal positions,
the goal hidden from the observation, and ``ad generate metaworld`` (noise distillation from Meta-World's scripted
experts).

A task is one ML1 goal (``mw-reach-v3-test-g07`` = ``metaworld.ML1("reach-v3", seed).test_tasks[7]``); the
dataset's held-out tasks are ML1's test goals. Each history is a run of episodes of one goal, shortened to
``--episode-length`` steps, whose action noise falls episode by episode; Meta-World's per-step ``success`` flag is
an extra column.

    ad generate metaworld --skill reach-v3 --source noise --out data/mw [--train-goals 0-49] [--heldout-goals 0-49]
                          [--episodes 40] [--episode-length 100] [--noise-max 4] [--noise-min 0.1] [--seed 0]

Importing this package registers the Gymnasium id (``ad/MetaWorldML1-v0``, with a ``vector_entry_point`` over many
goals), the CLI command and the evaluation env; Meta-World and MuJoCo are imported only when one of them runs.
"""
from __future__ import annotations

import gymnasium

from ad.families import TaskFamily, register_family
from ad.registry import lazy_function
from tasks.metaworld.config import GenerateConfig
from tasks.metaworld.demo import MetaWorldDemoConfig
from tasks.metaworld.vector_env import DEFAULT_EPISODE_LENGTH

#: The Gymnasium id registered here (the one place): one ML1 goal (kwargs ``skill``, ``split``, ``goal``,
#: ``ml1_seed``); ``gymnasium.make_vec(GYM_ID, num_envs, vectorization_mode="vector_entry_point", goals=[...])``
#: steps many goals in one :class:`~tasks.metaworld.vector_env.MetaWorldVectorEnv`.
GYM_ID = "ad/MetaWorldML1-v0"

if GYM_ID not in gymnasium.registry:
    gymnasium.register(id=GYM_ID, entry_point="tasks.metaworld.env:MetaWorldML1Env",
                       vector_entry_point="tasks.metaworld.vector_env:make_vector_env",
                       max_episode_steps=DEFAULT_EPISODE_LENGTH)


register_family(TaskFamily(
    name="metaworld",
    summary="Meta-World ML1 (a robot arm, hidden goals, 50 + 50 goal split): noisy scripted-expert histories",
    generate_config=GenerateConfig,
    generate=lazy_function("tasks.metaworld.generate:generate"),
    gym_id=GYM_ID,
    eval_kwargs=lazy_function("tasks.metaworld.vector_env:eval_kwargs"),
    demo_config=MetaWorldDemoConfig,
    task_kwargs=("skill", "ml1_seed", "episode_length"),
))
