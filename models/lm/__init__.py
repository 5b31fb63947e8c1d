"""Causal language models (+ LoRA) on Language-format learning histories.

Registers `ad train lm` and its `ad eval` policy loader. Heavy modules (torch, transformers, peft, lightning) load
only when used: ``from models.lm import LMPolicy`` works, but importing this package alone imports none of them.
"""
from __future__ import annotations

from ad.registry import lazy_exports, lazy_function, register, register_demo
from models.lm import loader as _loader  # noqa: F401  (registers the `ad eval` policy loader)
from models.lm.config import LoRAOptions, TrainLMConfig
from models.lm.demo_config import LMDemoConfig

_LAZY = {
    "LMPolicy": "models.lm.policy",
    "GeneratePolicy": "models.lm.policy",
    "LMLightningModule": "models.lm.module",
    "LMDataModule": "models.lm.data",
    "load_base": "ad.lm.pretrained",
    "train": "models.lm.train",
}

__all__ = ["LoRAOptions", "TrainLMConfig", *_LAZY]
__getattr__ = lazy_exports(__name__, _LAZY)


register("train", "lm", TrainLMConfig, lazy_function("models.lm.train:run"),
         help="train a causal LM (pretrained + LoRA, or --model scratch) on a Language-format dataset (acts by "
              "scoring valid actions)")
register_demo(LMDemoConfig.FAMILY, "lm", LMDemoConfig, lazy_function("ad.demo:run"),
              help="Algorithm Distillation in the Language format on DarkRoom: a causal LM on the histories' text, "
                   "in context on the held-out goals beside the RL-format AD (writes report-lm.md)")
