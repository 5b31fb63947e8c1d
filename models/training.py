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

    learning_rate: float = 1e-3
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
    floor = optim.min_lr / optim.learning_rate
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def fast_adamw_kwargs() -> dict:
    """The fused AdamW kernel where this torch has it on CPU, else the multi-tensor one."""
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], fused=True)
        return {"fused": True}
    except (RuntimeError, TypeError):
        return {"foreach": True}


def non_finite_error(err: NonFiniteLossError, last_checkpoint) -> UserError:
    """The user-facing message for a run stopped by a NaN / inf loss."""
    return UserError(f"training stopped: the loss became {err.metrics.get('loss')} at step {err.step} "
                     f"(metrics {err.metrics}); the last good checkpoint is {last_checkpoint} (if one was written). "
                     "Lower --learning-rate, raise --warmup-steps or set --grad-clip, then start a new run or --resume")
