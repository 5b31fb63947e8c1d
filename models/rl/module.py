"""`ADLightningModule`: the training / validation steps and the optimiser of the AD transformer, nothing else."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import lightning as L
import torch

from models.rl.config import ADConfig
from models.rl.model import ADTransformer


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


class ADLightningModule(L.LightningModule):
    """Trains an :class:`ADTransformer`; metrics go to the logger as train/* and val/*."""

    def __init__(self, model_config: dict, optim: dict, log_every: int = 25):
        super().__init__()
        self.save_hyperparameters()
        self.model = ADTransformer(ADConfig(**model_config))
        self.optim = OptimConfig(**optim)
        self.log_every = log_every

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, metrics = self.model.compute_loss(batch)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(self.global_step, {k: float(v) for k, v in metrics.items()})
        self.log("loss", metrics["loss"], prog_bar=True, logger=False)
        if (self.global_step + 1) % self.log_every == 0:  # only on the steps the Trainer writes logs (log_every_n_steps)
            self.log_dict({f"train/{k}": v for k, v in metrics.items()}, batch_size=batch["actions"].size(0))
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=1)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        _, metrics = self.model.compute_loss(batch)
        self.log_dict({f"val/{k}": v for k, v in metrics.items()}, batch_size=batch["actions"].size(0),
                      prog_bar=False)

    def configure_optimizers(self):
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():  # decay matrices only, not biases / norms / embeddings
            is_matrix = p.dim() >= 2 and "emb" not in name
            (decay if is_matrix else no_decay).append(p)
        groups = [{"params": decay, "weight_decay": self.optim.weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        optimizer = torch.optim.AdamW(groups, lr=self.optim.lr, betas=(self.optim.beta1, self.optim.beta2),
                                      **fast_adamw_kwargs())
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, self.optim))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def fast_adamw_kwargs() -> dict:
    """The fused AdamW kernel where this torch has it on CPU, else the multi-tensor one."""
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], fused=True)
        return {"fused": True}
    except (RuntimeError, TypeError):
        return {"foreach": True}


def optim_config_of(config) -> dict:
    """The optimiser fields of a TrainRLConfig, as a dict for ADLightningModule."""
    values = {name: getattr(config, name) for name in asdict(OptimConfig())}
    values["decay_steps"] = config.decay_steps or config.max_steps
    return values
