"""trl's GRPOTrainer with every generated completion logged (nothing dropped), plus the chunk/TensorBoard callbacks.

Why GRPO: trl (1.x) has no PPO any more; its online RL trainers are GRPO and RLOO. GRPO needs no value model
(important on a CPU budget), scores a group of ``num_generations`` completions per prompt against the group mean,
and is trl's most maintained online trainer. Its generation step, ``_generate_and_score_completions``, sees every
completion exactly once, so the log hooks in there (trl's own completions table keeps only the latest batch).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from tasks.rlhf.rollouts import RolloutLog


class LoggingGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that hands each generation batch (texts, ids, rewards, behaviour logprobs, advantages) to a
    :class:`RolloutLog`. The reward function must be wrapped with :func:`tasks.rlhf.reward.checked_reward` whose
    ``on_scored`` calls :meth:`scored` (that is how the texts and rewards of the batch arrive)."""

    def __init__(self, *args: Any, rollout_log: RolloutLog | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rollout_log = rollout_log
        self._scored: list[tuple[list[str], list[str], list[float]]] = []

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
        prompts, completions, rewards = self._scored[0]
        prompt_ids, prompt_mask = out["prompt_ids"], out["prompt_mask"]  # (n, P) left-padded
        completion_ids, completion_mask = out["completion_ids"], out["completion_mask"]  # (n, C) right-padded
        logps = out.get("old_per_token_logps")  # trl computes it only when generation and updates are misaligned
        if logps is None:
            logps = self.behaviour_logprobs(prompt_ids, prompt_mask, completion_ids, completion_mask)  # (n, C)
        pm, cm = prompt_mask.bool().cpu(), completion_mask.bool().cpu()
        p_ids, c_ids, lps = prompt_ids.cpu(), completion_ids.cpu(), logps.float().cpu()
        eos = torch.tensor(sorted(self.eos_token_ids))
        lengths = cm.sum(1)  # (n,)
        last = c_ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # (n,) last kept token
        terminated = (torch.isin(last, eos) & (lengths > 0)).numpy()
        self.rollout_log.add(
            update=int(self.state.global_step), prompts=prompts, completions=completions, rewards=rewards,
            prompt_ids=[p_ids[i][pm[i]].tolist() for i in range(len(pm))],
            completion_ids=[c_ids[i][cm[i]].tolist() for i in range(len(cm))],
            logprobs=[lps[i][cm[i]].numpy() for i in range(len(cm))],
            advantages=out["advantages"].float().cpu().numpy(), terminated=terminated)
        return out

    @torch.no_grad()
    def behaviour_logprobs(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                           completion_mask: torch.Tensor) -> torch.Tensor:
        """Per-token log-probabilities ``(n, C)`` of the completions under the current (= behaviour) policy,
        temperature applied exactly as trl's loss does (one no-grad forward pass)."""
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)  # (n, P + C)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)  # (n, P + C)
        logps, _, _ = self._get_per_token_logps_and_entropies(self.model, input_ids, attention_mask,
                                                              completion_ids.size(1))
        return logps


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


