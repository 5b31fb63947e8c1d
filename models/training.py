"""Training helpers shared by every model family: the Lightning steps, the optimiser and its schedule, the
non-finite-loss stop."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import lightning as L
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


def optim_config_of(config: Any) -> dict:
    """The optimiser fields of a training config (``ad train rl`` / ``lm``), as a dict for a :class:`StepModule`."""
    values = {name: getattr(config, name) for name in asdict(OptimConfig())}
    values["decay_steps"] = config.decay_steps or config.max_steps
    return values


def lr_multiplier(step: int, optim: OptimConfig) -> float:
    """Learning rate at ``step`` divided by the peak: linear warm-up, cosine decay, then the floor."""
    if step < optim.warmup_steps:
        return (step + 1) / optim.warmup_steps
    span = max(1, optim.decay_steps - optim.warmup_steps)
    progress = min(1.0, (step - optim.warmup_steps) / span)
    floor = optim.min_lr / optim.learning_rate
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def adamw_kwargs_for(precision: str) -> dict:
    """The AdamW kernel of a run at Lightning ``precision``: :func:`fast_adamw_kwargs` in float32; the multi-tensor
    one in mixed precision, whose gradient clipping Lightning refuses with a fused optimiser (it would unscale the
    gradients)."""
    return fast_adamw_kwargs() if precision == "32-true" else {"foreach": True}


def fast_adamw_kwargs() -> dict:
    """The fused AdamW kernel where this torch has it on CPU, else the multi-tensor one."""
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], fused=True)
        return {"fused": True}
    except (RuntimeError, TypeError):
        return {"foreach": True}


class StepModule(L.LightningModule):
    """Every model family's Lightning steps and AdamW (:func:`lr_multiplier` per step; metrics as train/* and val/*): a
    family sets ``optim`` and ``log_every`` and gives :meth:`losses`, :meth:`batch_size`, :meth:`parameter_groups`."""

    optim: OptimConfig
    log_every: int

    def losses(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss of ``batch`` and its metrics (``loss`` among them)."""
        raise NotImplementedError

    def batch_size(self, batch: dict[str, torch.Tensor]) -> int:
        raise NotImplementedError

    def parameter_groups(self) -> list[dict]:
        """AdamW's parameter groups (a group without ``weight_decay`` gets ``optim.weight_decay``)."""
        raise NotImplementedError

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, metrics = self.losses(batch)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(self.global_step, {k: float(v) for k, v in metrics.items()})
        self.log("loss", metrics["loss"], prog_bar=True, logger=False)
        if (self.global_step + 1) % self.log_every == 0:  # the steps the Trainer logs (log_every_n_steps)
            self.log_dict({f"train/{k}": v for k, v in metrics.items()}, batch_size=self.batch_size(batch),
                          sync_dist=True)  # mean over DDP ranks (a no-op in one process)
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=1)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        _, metrics = self.losses(batch)
        self.log_dict({f"val/{k}": v for k, v in metrics.items()}, batch_size=self.batch_size(batch))

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameter_groups(), lr=self.optim.learning_rate, betas=(self.optim.beta1,
                                      self.optim.beta2), weight_decay=self.optim.weight_decay,
                                      **adamw_kwargs_for(self.trainer.precision))
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, self.optim))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def non_finite_error(err: NonFiniteLossError, last_checkpoint) -> UserError:
    """The user-facing message for a run stopped by a NaN / inf loss."""
    return UserError(f"training stopped: the loss became {err.metrics.get('loss')} at step {err.step} "
                     f"(metrics {err.metrics}); the last good checkpoint is {last_checkpoint} (if one was written). "
                     "Lower --learning-rate, raise --warmup-steps or set --grad-clip, then start a new run or --resume")
