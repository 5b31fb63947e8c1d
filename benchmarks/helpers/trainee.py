"""A model trained by a plain PyTorch loop and timed, for the training benchmarks that compare models (or
precisions) step for step on the same batches."""
from __future__ import annotations

import time
from typing import Any

import torch


class Trainee:
    """A model, its optimiser, its gradient clipping, whether it trains under bfloat16 autocast on the CPU, and
    the seconds its optimiser steps took.

    ``model.compute_loss(batch)`` must return ``(loss, {"action_nll": ...})``, as the toolkit's models do.
    """

    def __init__(self, name: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer, clip: float,
                 bf16: bool = False):
        self.name, self.model, self.optimizer, self.clip, self.bf16 = name, model, optimizer, clip, bf16
        self.seconds, self.steps = 0.0, 0

    def autocast(self) -> Any:
        """The bfloat16 autocast context of a bf16 trainee (a no-op otherwise)."""
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16)

    def run(self, batches: list[dict]) -> None:
        """One optimiser step per batch, the seconds and steps added to the trainee's clock."""
        self.model.train()
        start = time.perf_counter()
        for batch in batches:
            with self.autocast():
                loss, _ = self.model.compute_loss(batch)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.clip:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.optimizer.step()
        self.seconds += time.perf_counter() - start
        self.steps += len(batches)

    def reset_clock(self) -> None:
        """Forget the time and steps so far (after a warm-up outside the timing)."""
        self.seconds, self.steps = 0.0, 0

    @torch.no_grad()
    def nll(self, batches: list[dict]) -> float:
        """The mean action NLL over ``batches`` in eval mode (under the trainee's autocast)."""
        self.model.eval()
        with self.autocast():
            return sum(float(self.model.compute_loss(b)[1]["action_nll"]) for b in batches) / len(batches)
