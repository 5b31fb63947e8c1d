"""Math word problems (GSM8K style): REINFORCE with a KL to a periodically refreshed reference
(trl's RLOO), every sampled solution logged as a learning history (``ad generate math``).

    ad generate math --out data/math                           # offline generated word problems
    ad generate math --problems my_gsm8k.jsonl --out data/gsm  # a GSM8K-format jsonl ('question', '... #### n')
    ad train lm --data data/math                               # the Language format (the 'rollout' template)

Importing registers the command; torch / trl / pyarrow load only when it runs. Histories render in the Language
format with the ``rollout`` template (``prompt: <problem>\ncompletion: <solution>\nreward: 1\n###``).
"""
from __future__ import annotations

from ad.families import TaskFamily, register_family
from ad.registry import lazy_function
from tasks.math.config import GenerateConfig

register_family(TaskFamily(
    name="math",
    summary="REINFORCE (trl RLOO) + KL to a refreshed reference on math word problems; every solution logged",
    generate_config=GenerateConfig,
    generate=lazy_function("tasks.math.generate:generate"),
))
