"""Math word problems (GSM8K style): REINFORCE with a KL to a periodically refreshed reference
(trl's RLOO), every sampled solution logged as a learning history (``ad generate math``).

Importing registers the command; torch / trl / pyarrow load only when it runs. Histories render in the Language
format with the ``rollout`` template.
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
