"""`ADLightningModule`: the training / validation steps and the optimiser of the AD transformer, nothing else."""
from __future__ import annotations

from dataclasses import asdict

import lightning as L
import torch

from models.training import NonFiniteLossError, OptimConfig, fast_adamw_kwargs, lr_multiplier  # noqa: F401
from models.rl.config import ADConfig
from models.rl.model import ADTransformer


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
            self.log_dict({f"train/{k}": v for k, v in metrics.items()}, batch_size=batch["actions"].size(0),
                          sync_dist=True)  # mean over DDP ranks (a no-op in one process)
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=1)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        _, metrics = self.model.compute_loss(batch)
        self.log_dict({f"val/{k}": v for k, v in metrics.items()}, batch_size=batch["actions"].size(0),
                      prog_bar=False)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(parameter_groups(self.model, self.optim.weight_decay),
                                      lr=self.optim.learning_rate, betas=(self.optim.beta1, self.optim.beta2),
                                      **fast_adamw_kwargs())
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, self.optim))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: weight decay on the weight matrices only, not on biases, norms or embeddings."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        is_matrix = p.dim() >= 2 and "emb" not in name
        (decay if is_matrix else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def optim_config_of(config) -> dict:
    """The optimiser fields of a TrainRLConfig, as a dict for ADLightningModule."""
    values = {name: getattr(config, name) for name in asdict(OptimConfig())}
    values["decay_steps"] = config.decay_steps or config.max_steps
    return values
