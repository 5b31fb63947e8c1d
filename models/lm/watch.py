"""Held-out in-context return during `ad train lm` (the loss alone does not show in-context learning):
:class:`HeldoutReturn`, a Lightning callback that acts in context on the held-out tasks every ``every`` steps and
logs ``val/return_first5`` and ``val/return_last5`` (mean return / optimal over the first and last 5 episodes).
"""
from __future__ import annotations

from typing import Any

import lightning as L
import torch


class HeldoutReturn(L.Callback):
    """Act in context on held-out tasks every ``every`` optimiser steps and log return / optimal: ``make_env``
    returns an ``ad.evaluate.EvalEnv``, ``policy_kwargs`` are the :class:`models.lm.policy.LMPolicy` arguments besides
    the model, and ``seed`` is the same at every check."""

    def __init__(self, every: int, episodes: int, make_env: Any, policy_kwargs: dict[str, Any], seed: int = 0):
        self.every, self.episodes, self.make_env = every, episodes, make_env
        self.policy_kwargs, self.seed = policy_kwargs, seed
        self.history: list[tuple[int, float, float]] = []  # (step, first-5, last-5)

    def check(self, model: Any, step: int) -> tuple[float, float]:
        """(first-5, last-5) mean return / optimal of ``model`` in context on the held-out tasks."""
        from ad.evaluate import run_in_context
        from models.lm.policy import LMPolicy

        was_training = model.training
        policy = LMPolicy(model, greedy=False, generator=torch.Generator().manual_seed(self.seed),
                          **self.policy_kwargs)
        with torch.inference_mode():
            result = run_in_context(policy, self.make_env(), self.episodes, self.seed, "held-out", progress=False)
        model.train(was_training)
        norm = result.normalised_curve()  # (episodes,)
        first, last = float(norm[:5].mean()), float(norm[-5:].mean())
        self.history.append((step, first, last))
        return first, last

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = trainer.global_step
        if step % self.every or not trainer.is_global_zero:
            return
        first, last = self.check(pl_module.model, step)
        pl_module.log_dict({"val/return_first5": first, "val/return_last5": last}, rank_zero_only=True)
        print(f"step {step}: held-out return / optimal, episodes 1-5 {first:.2f}, episodes "
              f"{self.episodes - 4}-{self.episodes} {last:.2f}", flush=True)
