"""trl's ``SFTTrainer`` with the loss computed only where it is taken: the LM head and the log-softmax over the
vocabulary run on the command tokens (labels != -100), not on every prompt position.

Off Triton devices trl 1.16's fused LM head scores every position over the whole vocabulary; with ~300-token
prompts and 2-6-token commands that head took 42% of a CPU SFT step. The loss is the same as trl's (mean NLL of
the labelled tokens, head in float32; ``tests/test_textworld_sft.py`` checks loss and gradients). Imports trl:
import this module only when SFT runs.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from trl import SFTTrainer

from ad.lm.scoring import base_model


class CommandLossSFTTrainer(SFTTrainer):
    """``SFTTrainer`` whose loss reads the LM head at the labelled positions only; logs ``mean_token_accuracy``
    (greedy next token = label, over the labelled tokens) as trl does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.token_accuracy: list[float] = []  #: per-batch accuracies since the last log line

    def compute_loss(self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        """Mean NLL of the labelled tokens (over ``num_items_in_batch`` when the Trainer counts them)."""
        lm = base_model(model)  # the transformers LM, its LoRA layers active
        labels = inputs["labels"][:, 1:]  # (B, L-1) the token each position predicts
        keep = labels != -100  # (B, L-1)
        extra = {k: inputs[k] for k in ("attention_mask", "position_ids") if k in inputs}
        hidden = lm.get_decoder()(input_ids=inputs["input_ids"], use_cache=False,
                                  **extra).last_hidden_state  # (B, L, H)
        head = lm.get_output_embeddings()
        bias = None if head.bias is None else head.bias.float()
        logits = F.linear(hidden[:, :-1][keep].float(), head.weight.float(), bias)  # (N, V) labelled positions only
        targets = labels[keep]  # (N,)
        count = num_items_in_batch if num_items_in_batch is not None else keep.sum()
        loss = F.cross_entropy(logits, targets, reduction="sum") / torch.as_tensor(count).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes  # DDP averages gradients over processes, as in trl
        if len(targets):
            self.token_accuracy.append(float((logits.detach().argmax(-1) == targets).float().mean()))
        return (loss, {"logits": logits}) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add the mean token accuracy of the batches since the last log line (also to the run's summary line)."""
        if self.token_accuracy:
            logs["mean_token_accuracy"] = sum(self.token_accuracy) / len(self.token_accuracy)
            self.token_accuracy.clear()
        super().log(logs, start_time)
