"""trl's GRPOTrainer with every generated completion logged (nothing dropped), plus the chunk/TensorBoard callbacks.

GRPO because trl (1.x) has no PPO any more and GRPO needs no value model. Only trl's public extension points are
used: the reward function (:func:`tasks.rlhf.reward.checked_reward`) hands each generation batch to
:meth:`LoggingGRPOTrainer.scored`; ``compute_loss`` sees the (shuffled) batch trl trains on, matched back to the
scored rows by content (:func:`match_rows`), and its behaviour logprobs (trl's ``old_per_token_logps``, else those
a forward hook reads in the on-policy loss pass). What this relies on in trl (section "trl behaviour" below) is
pinned by ``tests/test_rlhf_trl_contract.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from tasks.rlhf.rollouts import RolloutLog


# ---------------------------------------------------------------------------------------------- trl behaviour
def loss_pass_logps(outputs: list[Any], completion_ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """(b, C) per-token logprobs of the completions from the policy forward(s) trl ran inside ``compute_loss``: trl
    >= 1.16's fused LM head returns ``log_probs`` (b, L - 1) over the shifted labels (already divided by the
    temperature); earlier trl ``logits`` (divided by the temperature here, as trl did). Chunked forwards are
    concatenated."""
    C = completion_ids.size(1)
    parts = []
    for out in outputs:
        logps = getattr(out, "log_probs", None)
        if logps is not None:
            parts.append(logps[:, -C:].detach().float())
            continue
        logits = getattr(out, "logits", None)
        if logits is None:
            raise RuntimeError(f"trl's loss-pass forward returned {type(out).__name__} without log_probs or logits; "
                               "this trl version is not supported by the RLHF history log")
        start = sum(p.size(0) for p in parts)
        ids = completion_ids[start:start + logits.size(0)]
        lp = torch.log_softmax(logits[:, -C - 1:-1].detach().float() / temperature, -1)
        parts.append(lp.gather(-1, ids.unsqueeze(-1).to(lp.device)).squeeze(-1))
    if not parts or sum(p.size(0) for p in parts) != completion_ids.size(0):
        raise RuntimeError(f"trl's loss pass ran {len(parts)} policy forward(s) covering "
                           f"{sum(p.size(0) for p in parts)} rows for a batch of {completion_ids.size(0)}; "
                           "this trl version is not supported by the RLHF history log")
    return torch.cat(parts)  # (b, C)


def tokenize_prompts(tokenizer: Any, prompts: list[str]) -> list[list[int]]:
    """Token ids of plain-text prompts, as trl's GRPOTrainer tokenizes them for generation."""
    return [list(ids) for ids in tokenizer(text=prompts)["input_ids"]]


# ---------------------------------------------------------------------------------------------- row matching
@dataclass
class LossRows:
    """Rows of one ``compute_loss`` call (trl's order), unpadded, on the CPU."""

    prompt_ids: list[tuple[int, ...]]
    completion_ids: list[tuple[int, ...]]
    advantages: list[float]
    logps: list[np.ndarray]  # (C_i,) behaviour logprobs of each row's completion tokens


def match_rows(prompt_ids: list[tuple[int, ...]], completion_ids: list[tuple[int, ...]], rewards: list[float],
               loss: LossRows) -> list[int]:
    """For every scored row (generation order), the index of its row in ``loss`` (trl's shuffled order). Rows are keyed
    by (prompt ids, completion ids): rows with the same key carry the same logprobs; should their rewards differ, they
    pair by rank (a group's advantage rises with the reward)."""
    loss_rows: dict[tuple, list[int]] = {}
    for j, key in enumerate(zip(loss.prompt_ids, loss.completion_ids)):
        loss_rows.setdefault(key, []).append(j)
    scored_rows: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(prompt_ids, completion_ids)):
        scored_rows.setdefault(key, []).append(i)
    where = [-1] * len(rewards)
    for key, rows in scored_rows.items():
        candidates = loss_rows.get(key, [])
        if len(candidates) != len(rows):
            raise RuntimeError(f"{len(rows)} scored completion(s) but {len(candidates)} row(s) of trl's loss batch "
                               f"hold prompt ids {list(key[0])[:8]}... and completion ids {list(key[1])[:8]}...; "
                               "this trl version is not supported by the RLHF history log")
        by_reward = sorted(rows, key=lambda i: (rewards[i], i))
        by_advantage = sorted(candidates, key=lambda j: (loss.advantages[j], j))
        for i, j in zip(by_reward, by_advantage):
            where[i] = j
    return where


@dataclass
class _Pending:
    """A scored generation batch waiting for its loss rows."""

    update: int
    prompts: list[str]
    completions: list[str]
    rewards: list[float]
    completion_ids: list[tuple[int, ...]]
    prompt_ids: list[tuple[int, ...]]
    loss: LossRows = field(default_factory=lambda: LossRows([], [], [], []))


class RolloutRecorder:
    """Joins what the reward function saw (generation order) with what the loss saw (trl's order) and hands each
    complete generation batch to a :class:`RolloutLog` (apart from the trainer so no name of ours shadows trl's)."""

    def __init__(self, log: RolloutLog, tokenizer: Any, eos_ids: set[int]) -> None:
        self.log, self.tokenizer, self.eos_ids = log, tokenizer, eos_ids
        self.pending: _Pending | None = None  # the scored batch whose loss rows have not all been seen yet
        self.prompt_ids: dict[str, tuple[int, ...]] = {}  # prompt text -> its token ids (as trl tokenizes it)

    def scored(self, update: int, prompts: list[str], completions: list[str], rewards: list[float],
               completion_ids: list[list[int]] | None) -> None:
        if self.pending is not None:
            raise RuntimeError("a generation batch was never fully seen by the loss; its rows were not logged")
        if completion_ids is None or len(completion_ids) != len(completions):
            raise RuntimeError("trl did not pass completion_ids to the reward function; this trl version is not "
                               "supported by the RLHF history log")
        new = [p for p in dict.fromkeys(prompts) if p not in self.prompt_ids]
        self.prompt_ids.update(zip(new, map(tuple, tokenize_prompts(self.tokenizer, new))))
        self.pending = _Pending(update, list(prompts), list(completions), list(rewards),
                                [tuple(int(t) for t in c) for c in completion_ids],
                                [self.prompt_ids[p] for p in prompts])

    def loss_rows(self, inputs: dict[str, Any], logps: torch.Tensor) -> None:
        """Rows of one ``compute_loss`` call with their (b, C) behaviour logprobs; logs the batch once complete."""
        b = self.pending
        pm, cm = inputs["prompt_mask"].bool().cpu(), inputs["completion_mask"].bool().cpu()  # (b, P), (b, C)
        p_ids, c_ids = inputs["prompt_ids"].cpu(), inputs["completion_ids"].cpu()
        b.loss.prompt_ids += [tuple(p_ids[i][pm[i]].tolist()) for i in range(len(pm))]
        b.loss.completion_ids += [tuple(c_ids[i][cm[i]].tolist()) for i in range(len(cm))]
        b.loss.advantages += inputs["advantages"].float().cpu().reshape(len(pm), -1)[:, 0].tolist()
        b.loss.logps += [logps[i][cm[i]].numpy() for i in range(len(cm))]
        if len(b.loss.advantages) >= len(b.completions):
            self.flush()

    def flush(self) -> None:
        """Hand the pending batch (all its loss rows seen) to the rollout log, in generation order."""
        b, self.pending = self.pending, None
        where = match_rows(b.prompt_ids, b.completion_ids, b.rewards, b.loss)
        terminated = np.array([len(c) > 0 and c[-1] in self.eos_ids for c in b.completion_ids], bool)
        self.log.add(
            update=b.update, prompts=b.prompts, completions=b.completions, rewards=b.rewards,
            prompt_ids=[list(b.loss.prompt_ids[j]) for j in where],
            completion_ids=[list(c) for c in b.completion_ids],
            logprobs=[b.loss.logps[j] for j in where],
            advantages=np.array([b.loss.advantages[j] for j in where], np.float32), terminated=terminated)


class LoggingGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that hands each generation batch (texts, ids, rewards, behaviour logprobs, advantages) to a
    :class:`RolloutLog`; its reward function must be wrapped with :func:`tasks.rlhf.reward.checked_reward` whose
    ``on_scored`` calls :meth:`scored`. Overrides one public method, ``compute_loss``."""

    def __init__(self, *args: Any, rollout_log: RolloutLog | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tokenizer = self.processing_class
        eos = getattr(self, "eos_token_ids", None) or [tokenizer.eos_token_id]
        self.ad_recorder = (RolloutRecorder(rollout_log, tokenizer, {int(t) for t in eos if t is not None})
                            if rollout_log is not None else None)

    def scored(self, prompts: list[str], completions: list[str], rewards: list[float],
               completion_ids: list[list[int]] | None = None) -> None:
        """Called by the wrapped reward function with the batch it scored (trl's generation order)."""
        if self.ad_recorder is not None and self.model.training:  # evaluation batches are not part of the history
            self.ad_recorder.scored(int(self.state.global_step), prompts, completions, rewards, completion_ids)

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        recorder = self.ad_recorder
        if recorder is None or recorder.pending is None or not model.training:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        outputs: list[Any] = []
        old = inputs.get("old_per_token_logps")  # (b, C) computed by trl right after generation, if it did
        handle = None if old is not None else model.register_forward_hook(lambda m, a, out: outputs.append(out))
        try:
            loss = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        finally:
            if handle is not None:
                handle.remove()
        logps = (old.detach().float() if old is not None
                 else loss_pass_logps(outputs, inputs["completion_ids"], self.args.temperature)).cpu()  # (b, C)
        outputs.clear()
        recorder.loss_rows(inputs, logps)
        return loss


class TensorBoardCallback(TrainerCallback):
    """Writes every numeric value the trainer logs as a TensorBoard scalar (tag ``rlhf/<name>``)."""

    def __init__(self, log_dir: str) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        for key, value in (logs or {}).items():
            if isinstance(value, (int, float)) and math.isfinite(float(value)):
                self.writer.add_scalar(f"rlhf/{key}", float(value), state.global_step)
        self.writer.flush()

    def on_train_end(self, *args: Any, **kwargs: Any) -> None:
        self.writer.close()
