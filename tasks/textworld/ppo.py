"""A compact step-wise PPO over game moves (trl 1.16 ships no PPO trainer): a value head on the LM's hidden state
at the prompt's last token, GAE over moves, a clipped policy ratio on the chosen command, a KL penalty to the SFT
policy (the same model with its fresh LoRA adapter disabled).

``ratio="valid-commands"`` (the default): ratio and KL are those of the distribution the policy acts by,
softmax(scores / temperature) over the move's valid commands (as GLAM, Carta et al. 2023), exact over them
(:mod:`tasks.textworld.command_scores`). ``ratio="command-tokens"``: ``exp(new - old)`` of the chosen command's
summed token log-probabilities and a per-token KL estimate (:mod:`tasks.textworld.command_tokens`); cheaper, but
it also measures probability moved to text the acting policy never sees. The step number is in the prompt, so
an episode's last move has next value 0 whatever ended it. Moves and GAE: :mod:`tasks.textworld.ppo_moves`.
"""
from __future__ import annotations

from typing import Any

import torch

from tasks.textworld.command_scores import policy_terms
from tasks.textworld.command_tokens import token_terms
from tasks.textworld.ppo_moves import Moves, game_starts, rescore


def ppo_loss(log_ratio: torch.Tensor, terms: dict[str, torch.Tensor], advantages: torch.Tensor,
             new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float,
             value_clip: float, vf_coef: float, kl_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO loss of B moves from their log ratios (B,) and per-move ``terms`` (:func:`token_terms` or
    :func:`tasks.textworld.command_scores.policy_terms`): the clipped policy loss, 0.5 x the (``value_clip``-clipped,
    if > 0) squared value error and the mean ``terms["kl"]``. Statistics: the three parts, the clip fraction and the
    mean of every term."""
    ratio = log_ratio.exp()
    policy = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip)).mean()
    value_err = (new_values - returns) ** 2  # (B,)
    if value_clip > 0:
        clipped = old_values + (new_values - old_values).clamp(-value_clip, value_clip)
        value_err = torch.maximum(value_err, (clipped - returns) ** 2)
    value = 0.5 * value_err.mean()
    kl = terms["kl"].mean()
    loss = policy + vf_coef * value + kl_coef * kl
    stats = {"policy_loss": float(policy.detach()), "value_loss": float(value.detach()),
             "clip_fraction": float(((ratio - 1).abs() > clip).float().mean()),
             **{name: float(term.detach().mean()) for name, term in terms.items()}}
    return loss, stats


class PPOLearner:
    """Optimises the LoRA adapter and the value head on an iteration's :class:`Moves`."""

    def __init__(self, model: Any, value_head: torch.nn.Module, *, lr: float, clip: float, value_clip: float,
                 vf_coef: float, kl_coef: float, epochs: int, batch_size: int, pad_id: int, seed: int,
                 max_grad_norm: float = 1.0, target_kl: float = 0.0, temperature: float = 1.0,
                 micro_batch_size: int = 0):
        self.model, self.value_head = model, value_head
        params = [p for p in model.parameters() if p.requires_grad] + list(value_head.parameters())
        self.optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        self.params = params
        self.clip, self.value_clip, self.vf_coef, self.kl_coef = clip, value_clip, vf_coef, kl_coef
        self.epochs, self.batch_size, self.pad_id, self.max_grad_norm = epochs, batch_size, pad_id, max_grad_norm
        self.target_kl = target_kl  #: > 0: stop an update once approx_kl passes 1.5 x this (SB3's rule)
        self.temperature = temperature  #: the acting temperature (the valid-commands distribution is tempered)
        self.micro_batch_size = micro_batch_size  #: moves (transcript: games) per forward / backward; 0 = all
        self.generator = torch.Generator().manual_seed(seed)

    def _minibatches(self, moves: Moves, first: list[int]) -> Any:
        """Shuffled minibatches of ~``batch_size`` moves, each as micro-batches of (move indices, game indices or None):
        transcripts by whole games (game g's moves from ``first[g]``), windowed moves one row each."""
        N, micro = len(moves.prompt_ids), self.micro_batch_size
        if moves.games is None:
            order = torch.randperm(N, generator=self.generator).tolist()
            for s in range(0, N, self.batch_size):
                idx = order[s:s + self.batch_size]
                step = micro or len(idx)
                yield [(idx[m:m + step], None) for m in range(0, len(idx), step)]
            return
        G = len(moves.games)
        per = max(1, round(self.batch_size * G / N))  # games per minibatch
        order = torch.randperm(G, generator=self.generator).tolist()
        for s in range(0, G, per):
            chosen = order[s:s + per]
            step = micro or len(chosen)
            yield [([i for g in chosen[m:m + step] for i in range(first[g], first[g + 1])], chosen[m:m + step])
                   for m in range(0, len(chosen), step)]

    def _terms(self, moves: Moves, idx: list[int], games: list[int] | None, first: list[int]
               ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        """(log ratio, per-move terms, hidden states at the prompts' ends) of moves ``idx`` (transcripts: they are
        the moves of ``games``, game g's from ``first[g]``), differentiable."""
        table, mask, hidden = rescore(self.model, moves, idx, games, first, self.pad_id)
        W, device = table.shape[1], table.device
        if moves.ratio == "valid-commands":
            log_ratio, terms = policy_terms(table, mask, moves.chosen[idx].to(device),
                                            moves.old_scores[idx, :W].to(device),
                                            moves.ref_scores[idx, :W].to(device), self.temperature)
        else:
            log_ratio, terms = token_terms(table, moves.old_logp[idx, :W].to(device),
                                           moves.ref_logp[idx, :W].to(device), mask)
        return log_ratio, terms, hidden

    def _backward(self, moves: Moves, micro_batches: list[tuple[list[int], list[int] | None]], first: list[int]
                  ) -> dict[str, float]:
        """Accumulate one minibatch's gradient and statistics over its micro-batches, each weighted by its share of the
        minibatch's moves (every term is a mean over moves)."""
        total = sum(len(idx) for idx, _ in micro_batches)
        stats: dict[str, float] = {}
        for idx, games in micro_batches:
            log_ratio, terms, hidden = self._terms(moves, idx, games, first)
            device = log_ratio.device
            new_values = self.value_head(hidden.float()).squeeze(-1)  # (b,)
            loss, st = ppo_loss(log_ratio, terms, moves.advantages[idx].to(device), new_values,
                                moves.values[idx].to(device), moves.returns[idx].to(device), self.clip,
                                self.value_clip, self.vf_coef, self.kl_coef)
            if not torch.isfinite(loss):
                raise FloatingPointError("PPO loss is not finite; lower --ppo-learning-rate")
            w = len(idx) / total
            (loss * w).backward()
            for k, v in {**st, "loss": float(loss.detach())}.items():
                stats[k] = stats.get(k, 0.0) + w * v
        return stats

    def update(self, moves: Moves) -> dict[str, float]:
        """``epochs`` passes over the moves in shuffled minibatches: mean statistics of the last pass, ``steps`` taken
        and ``stopped_early`` (1 when a minibatch's approx_kl passed 1.5 x ``target_kl``; its step is not taken)."""
        self.model.train()
        stats: list[dict[str, float]] = []
        steps, stopped = 0, False
        first = game_starts(moves)  # transcripts: where each game's moves start ([0] without games)
        for _ in range(self.epochs):
            stats = []
            for micro_batches in self._minibatches(moves, first):
                self.optimizer.zero_grad()
                st = self._backward(moves, micro_batches, first)
                stats.append(st)
                if self.target_kl > 0 and st["approx_kl"] > 1.5 * self.target_kl:
                    self.optimizer.zero_grad()
                    stopped = True
                    break
                torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
                self.optimizer.step()
                steps += 1
            if stopped:
                break
        if not stats:
            return {}
        return {**{k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}, "steps": float(steps),
                "stopped_early": float(stopped)}
