"""`ADLightningModule`: the training / validation steps and the optimiser of the AD transformer, nothing else."""
from __future__ import annotations

import torch

from models.training import OptimConfig, StepModule
from models.rl.config import ADConfig
from models.rl.model import ADTransformer


class ADLightningModule(StepModule):
    """Trains an :class:`ADTransformer`; metrics go to the logger as train/* and val/*."""

    def __init__(self, model_config: dict, optim: dict, log_every: int = 25):
        super().__init__()
        self.save_hyperparameters()
        self.model = ADTransformer(ADConfig(**model_config))
        self.optim = OptimConfig(**optim)
        self.log_every = log_every

    def losses(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.model.compute_loss(batch)

    def batch_size(self, batch: dict[str, torch.Tensor]) -> int:
        return batch["actions"].size(0)

    def parameter_groups(self) -> list[dict]:
        return parameter_groups(self.model, self.optim.weight_decay)


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: weight decay on the weight matrices only, not on biases, norms or embeddings."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        is_matrix = p.dim() >= 2 and "emb" not in name
        (decay if is_matrix else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
