"""`LMLightningModule`: training / validation steps and the optimiser of a LoRA-adapted causal LM.

Checkpoints hold only the trainable (LoRA) weights and the optimiser state: the frozen base model is
rebuilt from its name when a run resumes, so a checkpoint of SmolLM2 + LoRA is a few MB, not 500.
"""
from __future__ import annotations

from typing import Any

import torch

from models.training import OptimConfig, StepModule

def add_lora(model: Any, lora: dict[str, Any]) -> Any:
    """Wrap ``model`` in a peft ``PeftModel`` with LoRA adapters (``lora``: ``LoRAOptions.lora_dict()``); only the
    adapters are trainable."""
    import warnings

    from peft import get_peft_model

    from ad.config.groups import peft_lora_config

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")  # peft calls a deprecated API
        return get_peft_model(model, peft_lora_config(lora))


def sequence_loss(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Mean next-token cross-entropy over the labelled tokens (labels -100 elsewhere), and metrics."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits  # (B, L, V)
    targets = batch["labels"][:, 1:]  # (B, L-1): token t+1 is predicted at position t
    logits = logits[:, :-1].float()  # (B, L-1, V)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                             ignore_index=-100)
    labelled = targets != -100  # (B, L-1)
    accuracy = ((logits.argmax(-1) == targets) & labelled).sum() / labelled.sum().clamp(min=1)
    return loss, {"loss": loss.detach(), "token_accuracy": accuracy.detach(),
                  "tokens": batch["attention_mask"].sum().float()}


class LMLightningModule(StepModule):
    """Trains the LoRA adapters of a ``PeftModel``; metrics go to the logger as train/* and val/*."""

    def __init__(self, model: Any, optim: dict, log_every: int = 10):
        super().__init__()
        self.save_hyperparameters(ignore=["model"])
        self.model = model
        self.optim = OptimConfig(**optim)
        self.log_every = log_every
        self.strict_loading = False  # checkpoints hold the trainable weights only
        self._sharded = False

    def losses(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return sequence_loss(self.model, batch)

    def batch_size(self, batch: dict[str, torch.Tensor]) -> int:
        return batch["input_ids"].size(0)

    def parameter_groups(self) -> list[dict]:
        return [{"params": [p for p in self.model.parameters() if p.requires_grad]}]

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        trainable = {f"model.{n}" for n, p in self.model.named_parameters() if p.requires_grad}
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in trainable}

    def configure_model(self) -> None:
        """Under ``--strategy fsdp`` (a device mesh is set): FSDP2 ``fully_shard`` on every decoder layer (the
        classes the model lists in ``_no_split_modules``), then on the whole model. Otherwise nothing."""
        mesh = self.device_mesh
        if mesh is None or self._sharded:
            return
        from torch.distributed.fsdp import fully_shard

        data_parallel = mesh["data_parallel"]
        names = set(getattr(self.model, "_no_split_modules", None) or ())
        for layer in [m for m in self.model.modules() if type(m).__name__ in names]:
            fully_shard(layer, mesh=data_parallel)
        fully_shard(self.model, mesh=data_parallel)
        self._sharded = True
