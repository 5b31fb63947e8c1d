"""trl's RLOOTrainer (REINFORCE with a leave-one-out baseline and a KL penalty in the reward) with every sampled
solution logged, and the reference refresh of the seed for a LoRA policy.

**Logging without an extra forward pass.** Right after generation RLOO scores the completions without gradients
under the policy (the behaviour log-probabilities) and the reference (with LoRA: the ``"ref"`` adapter), then calls
the reward functions. A forward hook on the policy and the reference keeps the per-token log-probabilities of those
passes, and the reward function joins them with the batch's texts, token ids and rewards. Per-token KL = behaviour
logprob - reference logprob, the estimate RLOO itself subtracts (times ``beta``) from the reward.

**Reference refresh.** trl's ``sync_ref_model`` refuses PEFT models, so :class:`RefreshReference` copies the
trained adapter into the ``"ref"`` adapter every k iterations; without LoRA trl's own ``sync_ref_model`` does it.
What this relies on in trl's behaviour is pinned by ``tests/test_math_trainer.py``.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from transformers import TrainerCallback
from trl import RLOOTrainer


class ScoringPasses:
    """Collects the per-token log-probabilities of the no-grad forward passes of one generation batch, on the
    policy (``role="policy"``) and a separate reference model (``role="ref"``); with a LoRA policy both passes run
    through one module, policy first: the first ``n`` rows are the policy's, the next ``n`` the reference's."""

    def __init__(self) -> None:
        self.parts: dict[str, list[torch.Tensor]] = {"policy": [], "ref": []}
        self.handles: list[Any] = []

    def attach(self, module: torch.nn.Module, role: str) -> None:
        def hook(_module: Any, _args: Any, out: Any) -> None:
            logps = getattr(out, "log_probs", None)
            if logps is not None and not torch.is_grad_enabled():  # the scoring passes, not the loss or generation
                self.parts[role].append(logps.detach().float().cpu())  # (b, L) over shifted labels

        self.handles.append(module.register_forward_hook(hook))

    def take(self, n: int, has_ref: bool) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        """(policy rows, reference rows or None) of the last batch of ``n`` completions, each a list of (b_i, L_i)
        chunks; clears the buffer."""
        policy, ref = self.parts["policy"], self.parts["ref"]
        if not ref and has_ref:  # one module served both passes: split by order
            split, seen = 0, 0
            for i, part in enumerate(policy):
                seen += part.size(0)
                if seen == n:
                    split = i + 1
                    break
            policy, ref = policy[:split], policy[split:]
        self.parts = {"policy": [], "ref": []}
        for name, chunks in (("policy", policy), ("reference", ref if has_ref else [])):
            if has_ref or name == "policy":
                got = sum(c.size(0) for c in chunks)
                if got != n:
                    raise RuntimeError(f"trl's {name} scoring pass covered {got} rows for a batch of {n}; this trl "
                                       "version is not supported by the math history log")
        return policy, (ref if has_ref else None)

    def detach(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


def completion_logps(chunks: list[torch.Tensor], lengths: list[int]) -> list[np.ndarray]:
    """Per-row (C_i,) log-probabilities of the completion tokens from (b, L) scoring-pass chunks: the completion
    is the last ``max(lengths)`` positions (right-padded after each row's own length)."""
    width = max(lengths) if lengths else 0
    rows = torch.cat(chunks)[:, -width:] if width else torch.zeros(sum(c.size(0) for c in chunks), 0)  # (n, C)
    return [rows[i, :length].numpy().astype(np.float32) for i, length in enumerate(lengths)]


class LoggingRLOOTrainer(RLOOTrainer):
    """RLOOTrainer whose reward function (:func:`tasks.math.generate.reward_function`) hands each generation batch, with
    trl's own behaviour and reference per-token log-probabilities, to ``on_batch(update, rows)``; overrides nothing."""

    def __init__(self, *args: Any, on_batch: Callable[[int, dict[str, Any]], None] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ad_on_batch = on_batch
        self.ad_passes = ScoringPasses()
        self.ad_passes.attach(self.model, "policy")
        if self.ref_model is not None:
            self.ad_passes.attach(self.ref_model, "ref")

    def ad_scored(self, prompts: list[str], completions: list[str], completion_ids: list[list[int]],
                  rewards: list[float], extra: dict[str, list[Any]]) -> None:
        """Called by the reward function with the batch it scored (trl's generation order)."""
        if not self.model.training:  # evaluation batches are not part of the history
            self.ad_passes.take(len(completions), self.beta != 0.0)
            return
        lengths = [len(c) for c in completion_ids]
        policy, ref = self.ad_passes.take(len(completions), self.beta != 0.0)
        logps = completion_logps(policy, lengths)
        ref_logps = completion_logps(ref, lengths) if ref is not None else None
        kl = [float((lp - rp).sum()) for lp, rp in zip(logps, ref_logps)] if ref_logps is not None \
            else [0.0] * len(logps)
        if self.ad_on_batch is not None:
            self.ad_on_batch(int(self.state.global_step), {
                "prompts": prompts, "completions": completions, "completion_ids": completion_ids,
                "rewards": rewards, "logprobs": logps, "kl": kl, **extra})


class RefreshReference(TrainerCallback):
    """Copies the trained LoRA adapter (``default``) into trl's reference adapter (``ref``) every ``every``
    iterations: the seed's periodically refreshed reference policy, for a PEFT policy."""

    def __init__(self, model: Any, every: int) -> None:
        self.every = every
        params = dict(model.named_parameters())
        self.pairs = [(params[name], params[name.replace(".default.", ".ref.")])
                      for name in params if ".default." in name and name.replace(".default.", ".ref.") in params]
        if not self.pairs:
            raise RuntimeError("the policy has no 'ref' adapter to refresh (trl adds one when given a PeftModel)")
        self.refreshes = 0

    @torch.no_grad()
    def refresh(self) -> None:
        """Reference := current policy."""
        for trained, ref in self.pairs:
            ref.copy_(trained)
        self.refreshes += 1

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step > 0:  # resumed: the checkpoint holds the policy; the reference restarts from it (the
            self.refresh()         # same as the uninterrupted run when the resume point is a multiple of k)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.every == 0:
            self.refresh()
        return control
