"""TextWorld: TextWorldExpress CookingWorld behind a Gymnasium env, an LM policy that scores the valid commands,
SFT on gold paths (trl's ``SFTTrainer``, LoRA) and a compact step-wise PPO with a value head; every episode of
every phase logged as a learning history (``ad generate textworld``).

    ad generate textworld --out data/textworld      # base -> SFT -> PPO on CookingWorld, all logged
    ad inspect data/textworld
    ad train lm --data data/textworld               # the Language format (template "textworld")

Importing this package registers the gymnasium id ``ad/CookingWorld-v0``, the template and the CLI command;
nothing heavy (torch, the JVM) starts until one of them runs.
"""
from __future__ import annotations

import gymnasium

from ad.formats.language import register_template
from ad.lazy import lazy_function
from ad.registry import register
from tasks.textworld.config import GenerateConfig
from tasks.textworld.template import TextWorldTemplate

GYM_ID = "ad/CookingWorld-v0"

if GYM_ID not in gymnasium.registry:
    gymnasium.register(id=GYM_ID, entry_point="tasks.textworld.env:CookingWorldEnv")

register_template(TextWorldTemplate())
register("generate", "textworld", GenerateConfig, lazy_function("tasks.textworld.generate:generate"),
         help="CookingWorld (TextWorldExpress): base LM -> SFT on gold paths -> PPO with a value head, every "
              "episode logged")
