"""RLHF task: a small causal LM trained toward positive sentiment with trl's GRPO, every completion
logged as a learning history (``ad generate rlhf``). Importing registers the command; torch/trl load only when
it runs."""
from __future__ import annotations

from ad.registry import lazy_function, register
from tasks.rlhf.config import GenerateConfig


register("generate", "rlhf", GenerateConfig, lazy_function("tasks.rlhf.generate:generate"),
         help="GRPO (trl) toward positive sentiment; every completion logged as a learning history")
