"""A compact step-wise PPO over game moves (trl 1.16 ships no PPO trainer): a value head on the LM's hidden state,
GAE over moves, a clipped ratio on the chosen command's tokens, a KL penalty to the SFT policy.

* The policy is the SFT model (its LoRA merged) with a fresh LoRA adapter; the reference is the same model with
  the adapter disabled (no second copy).
* One *move* = a prompt and the command chosen. The command's log-probability is the sum over its tokens; the
  ratio is ``exp(new - old)`` of that sum, clipped as in PPO.
* The value head reads the last-layer hidden state at the prompt's last token; targets are GAE returns.
* An episode ends on success, failure or the step limit; the step number is in the prompt, so the limit is part of
  the state and the last move's next value is 0 in every case.

Pure pieces (:func:`gae`, :func:`ppo_loss`, :func:`move_logprobs`) are tested against slow references.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from tasks.textworld.scoring import base_model


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each (N, T), of N episodes padded to T moves (``mask`` 1 on real moves).

    Each episode ends after its last real move (next value 0).
    """
    N, T = rewards.shape
    mask = mask.to(rewards.dtype)
    next_values = torch.cat([values[:, 1:], torch.zeros(N, 1, dtype=values.dtype)], 1) * \
        torch.cat([mask[:, 1:], torch.zeros(N, 1, dtype=mask.dtype)], 1)  # (N, T) 0 after the last move
    deltas = (rewards + gamma * next_values - values) * mask  # (N, T)
    advantages = torch.zeros_like(rewards)
    running = torch.zeros(N, dtype=rewards.dtype)
    for t in range(T - 1, -1, -1):  # one vectorised step per move index, over all episodes
        running = deltas[:, t] + gamma * lam * running * (mask[:, t + 1] if t + 1 < T else 0.0)
        advantages[:, t] = running
    advantages = advantages * mask
    return advantages, (advantages + values) * mask


def ppo_loss(new_logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, token_mask: torch.Tensor,
             advantages: torch.Tensor, new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
             clip: float, value_clip: float, vf_coef: float, kl_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO loss of a minibatch of B moves; token tensors are (B, K) with ``token_mask`` 1 on the command's tokens.

    policy: mean over moves of max(-A r, -A clip(r, 1 - clip, 1 + clip)), r = exp(sum new - sum old);
    value: 0.5 mean max((v - R)^2, (old_v + clip(v - old_v, +-value_clip) - R)^2) (plain squared error if 0);
    KL: mean over moves of the summed per-token k3 estimate exp(ref - new) - (ref - new) - 1 (>= 0).
    Statistics also hold ``approx_kl``, how far the updated policy moved from the one that played: the mean over
    moves of (r - 1) - log r (k3 of the behaviour policy against the current one, >= 0; CleanRL's approx_kl).
    """
    token_mask = token_mask.to(new_logp.dtype)
    log_ratio = ((new_logp - old_logp) * token_mask).sum(-1)  # (B,)
    ratio = log_ratio.exp()
    policy = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip)).mean()
    value_err = (new_values - returns) ** 2  # (B,)
    if value_clip > 0:
        clipped = old_values + (new_values - old_values).clamp(-value_clip, value_clip)
        value_err = torch.maximum(value_err, (clipped - returns) ** 2)
    value = 0.5 * value_err.mean()
    d = (ref_logp - new_logp) * token_mask  # (B, K)
    kl = ((d.exp() - d - 1) * token_mask).sum(-1).mean()
    loss = policy + vf_coef * value + kl_coef * kl
    stats = {"policy_loss": float(policy.detach()), "value_loss": float(value.detach()), "kl": float(kl.detach()),
             "clip_fraction": float(((ratio - 1).abs() > clip).float().mean()),
             "approx_kl": float(((ratio - 1) - log_ratio).mean().detach())}
    return loss, stats


def move_logprobs(model: Any, prompt_ids: Sequence[Sequence[int]], command_ids: Sequence[Sequence[int]],
                  pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token logprobs (B, K), token mask (B, K), hidden state at each prompt's last token (B, H)) of B moves, one
    plain causal forward of prompt + command per row (right-padded); differentiable."""
    lm = base_model(model)
    device = next(lm.parameters()).device
    B = len(prompt_ids)
    lengths = [len(p) + len(c) for p, c in zip(prompt_ids, command_ids)]
    K = max(len(c) for c in command_ids)
    ids = torch.full((B, max(lengths)), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for b, (p, c) in enumerate(zip(prompt_ids, command_ids)):
        ids[b, :lengths[b]], attn[b, :lengths[b]] = torch.tensor(list(p) + list(c)), 1
    hidden = lm.get_decoder()(input_ids=ids.to(device), attention_mask=attn.to(device)).last_hidden_state
    # gather the K positions that predict each command token (the last prompt token onwards) and the value position
    rows = torch.arange(B)[:, None]  # (B, 1)
    starts = torch.tensor([len(p) - 1 for p in prompt_ids])  # (B,) last prompt token
    pos = (starts[:, None] + torch.arange(K)).clamp(max=ids.shape[1] - 1)  # (B, K)
    token_mask = torch.arange(K)[None, :] < torch.tensor([len(c) for c in command_ids])[:, None]  # (B, K)
    targets = torch.full((B, K), pad_id, dtype=torch.long)
    for b, c in enumerate(command_ids):
        targets[b, :len(c)] = torch.tensor(list(c))
    logits = lm.get_output_embeddings()(hidden[rows.to(device), pos.to(device)])  # (B, K, V)
    logp = torch.log_softmax(logits.float(), -1).gather(-1, targets.to(device)[..., None]).squeeze(-1)  # (B, K)
    return logp * token_mask.to(device), token_mask.to(device), hidden[torch.arange(B, device=device),
                                                                       starts.to(device)]


def game_logprobs(model: Any, sequences: Sequence[Sequence[int]], spans: Sequence[Sequence[tuple[int, int]]],
                  pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What :func:`move_logprobs` returns for every move of G transcript games, game-major, from one forward pass
    per game (right-padded (G, L)): ``sequences[g]`` is game g's transcript through its last command and
    ``spans[g]`` each move's command (start, end) in it; move k's prompt is ``sequences[g][:start]``, a prefix
    (``--transcript``). Differentiable; one pass over ~2,000 tokens replaces ~25 passes of growing prompts."""
    lm = base_model(model)
    device = next(lm.parameters()).device
    G, L = len(sequences), max(len(q) for q in sequences)
    ids = torch.full((G, L), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for g, q in enumerate(sequences):
        ids[g, :len(q)], attn[g, :len(q)] = torch.tensor(list(q)), 1
    hidden = lm.get_decoder()(input_ids=ids.to(device), attention_mask=attn.to(device)).last_hidden_state  # (G, L, H)
    moves = [(g, a, b) for g in range(G) for a, b in spans[g]]  # (game, start, end) of every command
    K = max(b - a for _, a, b in moves)
    game = torch.tensor([g for g, _, _ in moves])  # (N,)
    starts = torch.tensor([a - 1 for _, a, _ in moves])  # (N,) last prompt token of each move
    pos = (starts[:, None] + torch.arange(K)).clamp(max=L - 1)  # (N, K) positions predicting the command tokens
    token_mask = torch.arange(K)[None, :] < torch.tensor([b - a for _, a, b in moves])[:, None]  # (N, K)
    targets = ids[game[:, None], (pos + 1).clamp(max=L - 1)].masked_fill(~token_mask, pad_id)  # (N, K)
    logits = lm.get_output_embeddings()(hidden[game[:, None].to(device), pos.to(device)])  # (N, K, V)
    logp = torch.log_softmax(logits.float(), -1).gather(-1, targets.to(device)[..., None]).squeeze(-1)  # (N, K)
    return logp * token_mask.to(device), token_mask.to(device), hidden[game.to(device), starts.to(device)]


def transcript_games(episodes: Sequence[Any]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """Each transcript episode as (its tokens through the last command, each move's command span); ValueError if a
    move's prompt tokens are not the prefix the transcript implies."""
    games = []
    for e in episodes:
        sequence = list(e.prompt_ids[-1]) + list(e.command_ids[-1])
        spans = [(len(p), len(p) + len(c)) for p, c in zip(e.prompt_ids, e.command_ids)]
        for p, c, (a, b) in zip(e.prompt_ids, e.command_ids, spans):
            if sequence[:a] != list(p) or sequence[a:b] != list(c):
                raise ValueError("not a transcript episode: a move's prompt is not a prefix of the game's last one")
        games.append((sequence, spans))
    return games


@dataclass
class Moves:
    """An iteration's moves, flattened, with what the update needs."""

    prompt_ids: list[list[int]]
    command_ids: list[list[int]]
    old_logp: torch.Tensor  #: (N, K) behaviour per-token log-probabilities (0 on padding)
    ref_logp: torch.Tensor  #: (N, K) reference (adapter off) per-token log-probabilities
    token_mask: torch.Tensor  #: (N, K)
    advantages: torch.Tensor  #: (N,)
    returns: torch.Tensor  #: (N,)
    values: torch.Tensor  #: (N,) behaviour values
    games: list[tuple[list[int], list[tuple[int, int]]]] | None = None  #: transcripts (:func:`transcript_games`)


def pad_tokens(rows: Sequence[Sequence[float]], K: int) -> torch.Tensor:
    """(N, K) float tensor of variable-length rows, zero-padded."""
    out = torch.zeros(len(rows), K)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(list(r), dtype=torch.float32)
    return out


def collect_moves(episodes: Sequence[Any], model: Any, gamma: float, lam: float, pad_id: int,
                  batch: int = 16, transcript: bool = False) -> Moves:
    """Flatten played episodes into :class:`Moves`: GAE from their rewards and values, advantages normalised
    over the iteration, reference log-probabilities from the model with its adapter disabled (``transcript``:
    one pass per game, :func:`game_logprobs`)."""
    T = max(len(e) for e in episodes)
    N = len(episodes)
    rewards, values, mask = torch.zeros(N, T, dtype=torch.float64), torch.zeros(N, T, dtype=torch.float64), \
        torch.zeros(N, T, dtype=torch.float64)
    for i, e in enumerate(episodes):
        rewards[i, :len(e)] = torch.tensor(e.rewards, dtype=torch.float64)
        values[i, :len(e)] = torch.tensor(e.values, dtype=torch.float64)
        mask[i, :len(e)] = 1
    adv, ret = gae(rewards, values, mask, gamma, lam)
    real = mask.bool()
    adv, ret, vals = adv[real].float(), ret[real].float(), values[real].float()  # (M,) episode-major
    adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(adv) > 1 else adv
    prompt_ids = [p for e in episodes for p in e.prompt_ids]
    command_ids = [c for e in episodes for c in e.command_ids]
    K = max(len(c) for c in command_ids)
    old = pad_tokens([lp for e in episodes for lp in e.logprobs], K)
    games = transcript_games(episodes) if transcript else None
    refs = []
    with torch.no_grad(), model.disable_adapter():
        if games is not None:
            for g in games:
                logp, _, _ = game_logprobs(model, [g[0]], [g[1]], pad_id)
                refs.append(torch.nn.functional.pad(logp.cpu(), (0, K - logp.shape[1])))
        else:
            for s in range(0, len(prompt_ids), batch):
                logp, _, _ = move_logprobs(model, prompt_ids[s:s + batch], command_ids[s:s + batch], pad_id)
                refs.append(torch.nn.functional.pad(logp.cpu(), (0, K - logp.shape[1])))
    token_mask = pad_tokens([[1.0] * len(c) for c in command_ids], K)
    return Moves(prompt_ids, command_ids, old, torch.cat(refs), token_mask, adv, ret, vals, games)


class PPOLearner:
    """Optimises the LoRA adapter and the value head on an iteration's :class:`Moves`."""

    def __init__(self, model: Any, value_head: torch.nn.Module, *, lr: float, clip: float, value_clip: float,
                 vf_coef: float, kl_coef: float, epochs: int, batch_size: int, pad_id: int, seed: int,
                 max_grad_norm: float = 1.0, target_kl: float = 0.0):
        self.model, self.value_head = model, value_head
        params = [p for p in model.parameters() if p.requires_grad] + list(value_head.parameters())
        self.optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        self.params = params
        self.clip, self.value_clip, self.vf_coef, self.kl_coef = clip, value_clip, vf_coef, kl_coef
        self.epochs, self.batch_size, self.pad_id, self.max_grad_norm = epochs, batch_size, pad_id, max_grad_norm
        self.target_kl = target_kl  #: > 0: stop an update once approx_kl passes 1.5 x this (SB3's rule)
        self.generator = torch.Generator().manual_seed(seed)

    def _minibatches(self, moves: Moves) -> Any:
        """Shuffled minibatches of ~``batch_size`` moves: (move indices, differentiable :func:`move_logprobs`
        output). Transcripts go by whole games, each game's moves from one pass (:func:`game_logprobs`)."""
        N = len(moves.prompt_ids)
        if moves.games is None:
            order = torch.randperm(N, generator=self.generator)
            for s in range(0, N, self.batch_size):
                idx = order[s:s + self.batch_size]
                yield idx, move_logprobs(self.model, [moves.prompt_ids[i] for i in idx],
                                         [moves.command_ids[i] for i in idx], self.pad_id)
            return
        first = [0]
        for _, spans in moves.games:
            first.append(first[-1] + len(spans))  # game g's moves are first[g] .. first[g + 1] - 1
        G = len(moves.games)
        per = max(1, round(self.batch_size * G / N))  # games per minibatch
        order = torch.randperm(G, generator=self.generator).tolist()
        for s in range(0, G, per):
            chosen = order[s:s + per]
            idx = torch.tensor([i for g in chosen for i in range(first[g], first[g + 1])])
            yield idx, game_logprobs(self.model, [moves.games[g][0] for g in chosen],
                                     [moves.games[g][1] for g in chosen], self.pad_id)

    def update(self, moves: Moves) -> dict[str, float]:
        """``epochs`` passes over the moves in shuffled minibatches; mean statistics of the last pass, plus
        ``steps`` (optimiser steps taken) and ``stopped_early`` (1 when ``target_kl`` ended the update: a minibatch
        whose approx_kl passed 1.5 x target_kl, checked before its step, which is not taken)."""
        self.model.train()
        stats: list[dict[str, float]] = []
        steps, stopped = 0, False
        for _ in range(self.epochs):
            stats = []
            for idx, (logp, mask, hidden) in self._minibatches(moves):
                K, device = logp.shape[1], logp.device
                new_values = self.value_head(hidden.float()).squeeze(-1)  # (b,)
                loss, st = ppo_loss(logp, moves.old_logp[idx, :K].to(device), moves.ref_logp[idx, :K].to(device),
                                    mask, moves.advantages[idx].to(device), new_values, moves.values[idx].to(device),
                                    moves.returns[idx].to(device), self.clip, self.value_clip, self.vf_coef,
                                    self.kl_coef)
                if not torch.isfinite(loss):
                    raise FloatingPointError("PPO loss is not finite; lower --ppo-lr")
                stats.append({**st, "loss": float(loss.detach())})
                if self.target_kl > 0 and st["approx_kl"] > 1.5 * self.target_kl:
                    stopped = True
                    break
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
                self.optimizer.step()
                steps += 1
            if stopped:
                break
        if not stats:
            return {}
        return {**{k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}, "steps": float(steps),
                "stopped_early": float(stopped)}
