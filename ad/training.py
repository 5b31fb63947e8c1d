"""Training helpers shared by every model family: the optimiser schedule and the non-finite-loss stop."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ad.errors import UserError


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or inf; the run stops before the bad step changes the weights."""

    def __init__(self, step: int, metrics: dict[str, float]):
        self.step = step
        self.metrics = metrics
        super().__init__(f"loss is not finite at step {step}: {metrics}")


@dataclass
class OptimConfig:
    """AdamW with linear warm-up then cosine decay to a floor (a subset of TrainRLConfig)."""

    lr: float = 1e-3
    min_lr: float = 1e-5
    warmup_steps: int = 100
    decay_steps: int = 3000  #: step at which the cosine reaches min_lr
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.99


def lr_multiplier(step: int, optim: OptimConfig) -> float:
    """Learning rate at ``step`` divided by the peak: linear warm-up, cosine decay, then the floor."""
    if step < optim.warmup_steps:
        return (step + 1) / optim.warmup_steps
    span = max(1, optim.decay_steps - optim.warmup_steps)
    progress = min(1.0, (step - optim.warmup_steps) / span)
    floor = optim.min_lr / optim.lr
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def fast_adamw_kwargs() -> dict:
    """The fused AdamW kernel where this torch has it on CPU, else the multi-tensor one."""
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], fused=True)
        return {"fused": True}
    except (RuntimeError, TypeError):
        return {"foreach": True}


def check_optim_options(config) -> None:
    """Validate the optimiser fields every training config shares (lr, min_lr, betas, weight decay, clipping)."""
    for name in ("warmup_steps", "decay_steps", "val_every", "num_workers", "threads"):
        if getattr(config, name) < 0:
            raise UserError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(config, name)}")
    if not 0 < config.lr or not 0 <= config.min_lr <= config.lr:
        raise UserError(f"need 0 < --lr and 0 <= --min-lr <= --lr, got --lr {config.lr}, --min-lr {config.min_lr}")
    if not (0 <= config.beta1 < 1 and 0 <= config.beta2 < 1):
        raise UserError(f"--beta1 and --beta2 must be in [0, 1), got {config.beta1}, {config.beta2}")
    if config.weight_decay < 0 or config.grad_clip < 0:
        raise UserError("--weight-decay and --grad-clip must be >= 0")


def non_finite_error(err: NonFiniteLossError, last_checkpoint) -> UserError:
    """The user-facing message for a run stopped by a NaN / inf loss."""
    return UserError(f"training stopped: the loss became {err.metrics.get('loss')} at step {err.step} "
                     f"(metrics {err.metrics}); the last good checkpoint is {last_checkpoint} (if one was written). "
                     "Lower --lr, raise --warmup-steps or set --grad-clip, then start a new run or --resume")
