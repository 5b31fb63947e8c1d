"""Decision-Transformer-style Algorithm-Distillation models on RL-format learning histories.

Registers `ad train rl`. Heavy modules (torch, lightning) load only when used:
``from models.rl import ADTransformer, ADPolicy`` works, but importing this
package alone imports neither.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from ad.registry import register
from models.rl.config import ADConfig, TrainRLConfig

_LAZY = {
    "ADTransformer": "models.rl.model",
    "KVCache": "models.rl.model",
    "ADPolicy": "models.rl.policy",
    "ADPolicyReference": "models.rl.policy",
    "ADLightningModule": "models.rl.module",
    "train": "models.rl.train",
}

__all__ = ["ADConfig", "TrainRLConfig", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'models.rl' has no attribute {name!r}")


def _run(config: TrainRLConfig) -> int:
    from models.rl.train import run

    return run(config)


register("train", "rl", TrainRLConfig, _run,
         help="train the AD transformer on an RL-format dataset (Lightning; checkpoints, TensorBoard, --resume)")
