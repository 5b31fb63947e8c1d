"""Decision-Transformer-style Algorithm-Distillation models on RL-format learning histories.

Registers `ad train rl` and its `ad eval` policy loader. Heavy modules (torch, lightning) load only when used:
``from models.rl import ADTransformer, ADPolicy`` works, but importing this
package alone imports neither.
"""
from __future__ import annotations

from ad.registry import lazy_exports, lazy_function, register
from models.rl import loader as _loader  # noqa: F401  (registers the `ad eval` policy loader)
from models.rl.config import ADConfig, TrainRLConfig

_LAZY = {
    "ADTransformer": "models.rl.model",
    "KVCache": "models.rl.model",
    "ADPolicy": "models.rl.policy",
    "ADLightningModule": "models.rl.module",
    "train": "models.rl.train",
}

__all__ = ["ADConfig", "TrainRLConfig", *_LAZY]
__getattr__ = lazy_exports(__name__, _LAZY)


register("train", "rl", TrainRLConfig, lazy_function("models.rl.train:run"),
         help="train the AD transformer on an RL-format dataset (Lightning; checkpoints, TensorBoard, --resume)")
