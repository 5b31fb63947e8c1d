"""trl's GRPOTrainer with every generated completion logged (nothing dropped), plus the chunk/TensorBoard callbacks.

Why GRPO: trl (1.x) has no PPO any more; its online RL trainers are GRPO and RLOO. GRPO needs no value model
(important on a CPU budget), scores a group of ``num_generations`` completions per prompt against the group mean,
and is trl's most maintained online trainer. Its generation step, ``_generate_and_score_completions``, sees every
completion exactly once, so the log hooks in there (trl's own completions table keeps only the latest batch).

Behaviour logprobs: when trl computes ``old_per_token_logps`` (generation and updates misaligned) those are logged;
otherwise (on-policy, the default) they come from trl's own loss pass, which evaluates the completions under the
same weights that generated them (no optimiser step happens between generation and the loss passes of a batch),
so logging costs no extra forward pass. The batch is written once all its rows went through the loss.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from tasks.rlhf.rollouts import RolloutLog

#: Key of the row-index tensor that rides along trl's shuffled / split batch to the loss pass.
_ROW_KEY = "ad_rollout_row"


class LoggingGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that hands each generation batch (texts, ids, rewards, behaviour logprobs, advantages) to a
    :class:`RolloutLog`. The reward function must be wrapped with :func:`tasks.rlhf.reward.checked_reward` whose
    ``on_scored`` calls :meth:`scored` (that is how the texts and rewards of the batch arrive)."""

    def __init__(self, *args: Any, rollout_log: RolloutLog | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rollout_log = rollout_log
        self._scored: list[tuple[list[str], list[str], list[float]]] = []
        self._pending: dict[str, Any] | None = None  # a batch waiting for its logprobs from the loss passes
        self._captured: torch.Tensor | None = None  # (b, C) policy logprobs of the current loss pass

    def scored(self, prompts: list[str], completions: list[str], rewards: list[float]) -> None:
        """Called by the wrapped reward function with the batch it scored."""
        self._scored.append((prompts, completions, rewards))

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._scored.clear()
        out = super()._generate_and_score_completions(inputs)
        if self.rollout_log is None or not self.model.training:  # evaluation batches are not part of the history
            return out
        if len(self._scored) != 1:
            raise RuntimeError(f"expected one scored batch per generation step, got {len(self._scored)}")
        if self._pending is not None:
            raise RuntimeError("a generation batch was never fully seen by the loss; its rows were not logged")
        prompts, completions, rewards = self._scored[0]
        completion_ids, completion_mask = out["completion_ids"], out["completion_mask"]  # (n, C) right-padded
        self._pending = {"update": int(self.state.global_step), "prompts": prompts, "completions": completions,
                         "rewards": rewards, "prompt_ids": out["prompt_ids"], "prompt_mask": out["prompt_mask"],
                         "completion_ids": completion_ids, "completion_mask": completion_mask,
                         "advantages": out["advantages"], "logps": out.get("old_per_token_logps")}
        if self._pending["logps"] is not None:  # trl computed the behaviour logprobs itself
            self._log_pending()
        else:
            self._pending["logps"] = torch.full(completion_ids.shape, float("nan"))  # (n, C) filled by the loss
            out[_ROW_KEY] = torch.arange(completion_ids.size(0))  # (n,) follows trl's shuffle and split
        return out

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        rows = inputs.pop(_ROW_KEY, None)  # (b,) rows of the pending batch in this loss pass
        self._captured = None
        loss = super()._compute_loss(model, inputs)
        if rows is not None and self._pending is not None:
            if self._captured is None or self._captured.size(0) != rows.numel():
                raise RuntimeError("trl's loss pass did not expose the policy logprobs of its batch")
            logps = self._pending["logps"]
            logps[rows.cpu(), : self._captured.size(1)] = self._captured.float().cpu()
            filled = ~torch.isnan(logps) | ~self._pending["completion_mask"].bool().cpu()
            if bool(filled.all()):
                self._log_pending()
        return loss

    def _get_per_token_logps_and_entropies(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        result = super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
        if torch.is_grad_enabled() and model is not getattr(self, "ref_model", None):  # the policy's loss pass
            self._captured = result[0].detach()  # (b, C)
        return result

    def _log_pending(self) -> None:
        """Hand the pending batch (all its logprobs known) to the rollout log."""
        b, self._pending = self._pending, None
        pm, cm = b["prompt_mask"].bool().cpu(), b["completion_mask"].bool().cpu()
        p_ids, c_ids, lps = b["prompt_ids"].cpu(), b["completion_ids"].cpu(), b["logps"].float().cpu()
        eos = torch.tensor(sorted(self.eos_token_ids))
        lengths = cm.sum(1)  # (n,)
        last = c_ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # (n,) last kept token
        terminated = (torch.isin(last, eos) & (lengths > 0)).numpy()
        self.rollout_log.add(
            update=b["update"], prompts=b["prompts"], completions=b["completions"], rewards=b["rewards"],
            prompt_ids=[p_ids[i][pm[i]].tolist() for i in range(len(pm))],
            completion_ids=[c_ids[i][cm[i]].tolist() for i in range(len(cm))],
            logprobs=[lps[i][cm[i]].numpy() for i in range(len(cm))],
            advantages=b["advantages"].float().cpu().numpy(), terminated=terminated)


class ChunkCallback(TrainerCallback):
    """Forces a checkpoint every ``chunk_steps`` iterations and at the end, then commits that chunk's rows.

    Order matters for resume: the trainer writes ``checkpoint-<step>`` first, then ``on_save`` commits the unit.
    A crash in between leaves a checkpoint newer than the last unit; resume ignores it (see generate.py).
    """

    def __init__(self, log: RolloutLog, chunk_steps: int, on_commit: Callable[[int, int], None]) -> None:
        self.log, self.chunk_steps, self.on_commit = log, chunk_steps, on_commit

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.chunk_steps == 0 or state.global_step >= state.max_steps:
            control.should_save = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = int(state.global_step)
        chunk = math.ceil(step / self.chunk_steps) - 1
        rows = self.log.commit(chunk, {"updates": [chunk * self.chunk_steps, step], "checkpoint": f"checkpoint-{step}"})
        self.on_commit(chunk, rows)
        return control


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


