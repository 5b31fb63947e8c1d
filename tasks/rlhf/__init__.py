"""RLHF task (seed 001): a small causal LM trained toward positive sentiment with trl's GRPO, every completion
logged as a learning history (``ad generate rlhf``). Importing registers the command; torch/trl load only when
it runs."""
from __future__ import annotations

from ad.registry import register
from tasks.rlhf.config import GenerateConfig


def _run_generate(cfg: GenerateConfig) -> int:
    from tasks.rlhf.generate import generate

    generate(cfg)
    return 0


register("generate", "rlhf", GenerateConfig, _run_generate,
         help="GRPO (trl) toward positive sentiment; every completion logged as a learning history")
