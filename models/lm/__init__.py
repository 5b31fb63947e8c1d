"""Causal language models (+ LoRA) on Language-format learning histories.

Registers `ad train lm`. Heavy modules (torch, transformers, peft, lightning) load only when used:
``from models.lm import LMPolicy`` works, but importing this package alone imports none of them.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from ad.registry import register
from models.lm.config import LoRAOptions, TrainLMConfig

_LAZY = {
    "LMPolicy": "models.lm.policy",
    "GeneratePolicy": "models.lm.policy",
    "sequence_logprob": "models.lm.policy",
    "LMLightningModule": "models.lm.module",
    "LMDataModule": "models.lm.data",
    "load_base": "ad.pretrained",
    "build_tiny": "models.lm.tiny",
    "train": "models.lm.train",
}

__all__ = ["LoRAOptions", "TrainLMConfig", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'models.lm' has no attribute {name!r}")


def _run(config: TrainLMConfig) -> int:
    from models.lm.train import run

    return run(config)


register("train", "lm", TrainLMConfig, _run,
         help="fine-tune a causal LM with LoRA on a Language-format dataset (acts by scoring valid actions)")
