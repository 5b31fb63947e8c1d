"""A compact step-wise PPO over game moves (trl 1.16 ships no PPO trainer): a value head on the LM's hidden state,
GAE over moves, a clipped policy ratio on the chosen command, a KL penalty to the SFT policy.

* The policy is the SFT model (its LoRA merged) with a fresh LoRA adapter; the reference is the same model with
  the adapter disabled (no second copy).
* One *move* = a prompt and the command chosen. A command's score is the sum of its tokens' log-probabilities.
* ``ratio="valid-commands"`` (the default): the ratio and the KL are those of the distribution the policy acts by,
  softmax(scores / temperature) over the move's valid commands (as GLAM, Carta et al. 2023, trains an LLM that
  picks among an environment's actions): the update rescores every valid command
  (:func:`tasks.textworld.command_scores.branch_scores`), the KL to the reference is exact over them.
  ``ratio="command-tokens"``: the ratio is ``exp(new - old)`` of the chosen command's summed token
  log-probabilities under the whole vocabulary and the KL a per-token estimate; cheaper, but a step can move
  probability between the valid commands and all other text, which the acting policy never sees (clip fraction
  and KL then measure changes that do not change play).
* The value head reads the last-layer hidden state at the prompt's last token; targets are GAE returns.
* An episode ends on success, failure or the step limit; the step number is in the prompt, so the limit is part of
  the state and the last move's next value is 0 in every case.

Pure pieces (:func:`gae`, :func:`ppo_loss`, :func:`token_terms`, :func:`move_logprobs`,
:func:`tasks.textworld.command_scores.policy_terms`) are tested against slow references.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from tasks.textworld.command_scores import MASKED_SCORE, Branch, branch_scores, pad_scores, policy_terms
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


def token_terms(new_logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, token_mask: torch.Tensor
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The chosen command's token terms of B moves (``--ppo-ratio command-tokens``); token tensors are (B, K) with
    ``token_mask`` 1 on the command's tokens. Returns (log ratio (B,) = sum new - sum old, per-move terms): ``kl``
    (B,) the summed per-token k3 estimate exp(ref - new) - (ref - new) - 1 (>= 0) of KL to the reference and
    ``approx_kl`` (B,) (r - 1) - log r, how far the updated policy moved from the one that played (CleanRL's)."""
    token_mask = token_mask.to(new_logp.dtype)
    log_ratio = ((new_logp - old_logp) * token_mask).sum(-1)  # (B,)
    d = (ref_logp - new_logp) * token_mask  # (B, K)
    return log_ratio, {"kl": ((d.exp() - d - 1) * token_mask).sum(-1),
                       "approx_kl": (log_ratio.exp() - 1) - log_ratio}


def ppo_loss(log_ratio: torch.Tensor, terms: dict[str, torch.Tensor], advantages: torch.Tensor,
             new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float,
             value_clip: float, vf_coef: float, kl_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO loss of a minibatch of B moves from their log ratios (B,) and per-move ``terms`` (:func:`token_terms`
    or :func:`tasks.textworld.command_scores.policy_terms`: ``kl`` to the reference, ``approx_kl``, maybe
    ``entropy``).

    policy: mean over moves of max(-A r, -A clip(r, 1 - clip, 1 + clip)), r = exp(log ratio);
    value: 0.5 mean max((v - R)^2, (old_v + clip(v - old_v, +-value_clip) - R)^2) (plain squared error if 0);
    KL: mean over moves of ``terms["kl"]``. Statistics: the three parts, the clip fraction and the mean of every
    term.
    """
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


#: What the PPO ratio and KL are taken on (``--ppo-ratio``).
RATIOS = ("valid-commands", "command-tokens")


@dataclass
class Moves:
    """An iteration's moves, flattened (game-major), with what the update needs. ``ratio`` says which policy
    terms are filled: "valid-commands" the candidate tables (``chosen``, ``old_scores``, ``ref_scores``,
    ``candidate_ids``), "command-tokens" the chosen command's token tables (``old_logp``, ``ref_logp``,
    ``token_mask``)."""

    ratio: str
    prompt_ids: list[list[int]]
    command_ids: list[list[int]]
    advantages: torch.Tensor  #: (N,)
    returns: torch.Tensor  #: (N,)
    values: torch.Tensor  #: (N,) behaviour values
    games: list[tuple[list[int], list[tuple[int, int]]]] | None = None  #: transcripts (:func:`transcript_games`)
    old_logp: torch.Tensor | None = None  #: (N, K) behaviour per-token log-probabilities (0 on padding)
    ref_logp: torch.Tensor | None = None  #: (N, K) reference (adapter off) per-token log-probabilities
    token_mask: torch.Tensor | None = None  #: (N, K)
    candidate_ids: list[list[list[int]]] | None = None  #: per move, the valid commands' token ids
    chosen: torch.Tensor | None = None  #: (N,) index of the command played among them
    old_scores: torch.Tensor | None = None  #: (N, A) behaviour scores of the valid commands (MASKED_SCORE past)
    ref_scores: torch.Tensor | None = None  #: (N, A) reference scores


def pad_tokens(rows: Sequence[Sequence[float]], K: int) -> torch.Tensor:
    """(N, K) float tensor of variable-length rows, zero-padded."""
    out = torch.zeros(len(rows), K)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(list(r), dtype=torch.float32)
    return out


def move_branches(moves: Moves, idx: Sequence[int]) -> tuple[list[list[int]], list[Branch]]:
    """Rows and branches (:func:`tasks.textworld.command_scores.branch_scores`) of windowed moves ``idx``: each
    move's prompt is a row with one branch at its end."""
    rows = [moves.prompt_ids[i] for i in idx]
    return rows, [Branch(j, len(rows[j]), moves.candidate_ids[i]) for j, i in enumerate(idx)]


def game_branches(moves: Moves, games: Sequence[int], first: Sequence[int]) -> tuple[list[list[int]], list[Branch]]:
    """Rows and branches of transcript games ``games``: each game is a row with a branch at every move's command
    (move m of game g is move ``first[g] + m`` of ``moves``)."""
    rows = [moves.games[g][0] for g in games]
    branches = [Branch(j, a, moves.candidate_ids[first[g] + m])
                for j, g in enumerate(games) for m, (a, _) in enumerate(moves.games[g][1])]
    return rows, branches


def game_starts(moves: Moves) -> list[int]:
    """Index of each transcript game's first move in ``moves`` (and the total at the end)."""
    first = [0]
    for _, spans in moves.games or []:
        first.append(first[-1] + len(spans))
    return first


def collect_moves(episodes: Sequence[Any], model: Any, gamma: float, lam: float, pad_id: int,
                  batch: int = 16, transcript: bool = False, ratio: str = "valid-commands") -> Moves:
    """Flatten played episodes into :class:`Moves`: GAE from their rewards and values, advantages normalised
    over the iteration, reference terms from the model with its adapter disabled (``transcript``: one pass per
    game); ``ratio`` as :class:`Moves`."""
    if ratio not in RATIOS:
        raise ValueError(f"ratio must be one of {RATIOS}, got {ratio!r}")
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
    moves = Moves(ratio, [p for e in episodes for p in e.prompt_ids], [c for e in episodes for c in e.command_ids],
                  adv, ret, vals, transcript_games(episodes) if transcript else None)
    if ratio == "valid-commands":
        _candidate_tables(moves, episodes, model, pad_id, batch)
    else:
        _token_tables(moves, episodes, model, pad_id, batch)
    return moves


def _candidate_tables(moves: Moves, episodes: Sequence[Any], model: Any, pad_id: int, batch: int) -> None:
    """Fill the "valid-commands" fields: the played choice and scores, the reference scores (adapter off)."""
    if any(len(e.candidate_scores) != len(e) for e in episodes):
        raise ValueError("episodes without their valid commands' scores (play with a TextWorldPolicy records them)")
    moves.candidate_ids = [c for e in episodes for c in e.candidate_ids]
    moves.chosen = torch.tensor([i for e in episodes for i in e.indices], dtype=torch.long)
    A = max(len(c) for c in moves.candidate_ids)
    moves.old_scores = pad_scores([s for e in episodes for s in e.candidate_scores], A)
    parts = []
    with torch.no_grad(), model.disable_adapter():
        if moves.games is not None:
            first = game_starts(moves)
            for g in range(len(moves.games)):
                parts.append(branch_scores(model, *game_branches(moves, [g], first), pad_id).scores.cpu())
        else:
            for s in range(0, len(moves.prompt_ids), batch):
                idx = range(s, min(s + batch, len(moves.prompt_ids)))
                parts.append(branch_scores(model, *move_branches(moves, idx), pad_id).scores.cpu())
    moves.ref_scores = torch.cat([torch.nn.functional.pad(p, (0, A - p.shape[1]), value=MASKED_SCORE)
                                  for p in parts])


def _token_tables(moves: Moves, episodes: Sequence[Any], model: Any, pad_id: int, batch: int) -> None:
    """Fill the "command-tokens" fields: the played and the reference (adapter off) per-token log-probabilities."""
    K = max(len(c) for c in moves.command_ids)
    moves.old_logp = pad_tokens([lp for e in episodes for lp in e.logprobs], K)
    refs = []
    with torch.no_grad(), model.disable_adapter():
        if moves.games is not None:
            for g in moves.games:
                logp, _, _ = game_logprobs(model, [g[0]], [g[1]], pad_id)
                refs.append(torch.nn.functional.pad(logp.cpu(), (0, K - logp.shape[1])))
        else:
            for s in range(0, len(moves.prompt_ids), batch):
                logp, _, _ = move_logprobs(model, moves.prompt_ids[s:s + batch], moves.command_ids[s:s + batch],
                                           pad_id)
                refs.append(torch.nn.functional.pad(logp.cpu(), (0, K - logp.shape[1])))
    moves.ref_logp = torch.cat(refs)
    moves.token_mask = pad_tokens([[1.0] * len(c) for c in moves.command_ids], K)


class PPOLearner:
    """Optimises the LoRA adapter and the value head on an iteration's :class:`Moves`."""

    def __init__(self, model: Any, value_head: torch.nn.Module, *, lr: float, clip: float, value_clip: float,
                 vf_coef: float, kl_coef: float, epochs: int, batch_size: int, pad_id: int, seed: int,
                 max_grad_norm: float = 1.0, target_kl: float = 0.0, temperature: float = 1.0):
        self.model, self.value_head = model, value_head
        params = [p for p in model.parameters() if p.requires_grad] + list(value_head.parameters())
        self.optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        self.params = params
        self.clip, self.value_clip, self.vf_coef, self.kl_coef = clip, value_clip, vf_coef, kl_coef
        self.epochs, self.batch_size, self.pad_id, self.max_grad_norm = epochs, batch_size, pad_id, max_grad_norm
        self.target_kl = target_kl  #: > 0: stop an update once approx_kl passes 1.5 x this (SB3's rule)
        self.temperature = temperature  #: the acting temperature (the valid-commands distribution is tempered)
        self.generator = torch.Generator().manual_seed(seed)

    def _minibatches(self, moves: Moves) -> Any:
        """Shuffled minibatches of ~``batch_size`` moves: (move indices, their rows and branches). Transcripts go
        by whole games, each game one row."""
        N = len(moves.prompt_ids)
        if moves.games is None:
            order = torch.randperm(N, generator=self.generator)
            for s in range(0, N, self.batch_size):
                idx = order[s:s + self.batch_size].tolist()
                yield idx, ([moves.prompt_ids[i] for i in idx], None)
            return
        first = game_starts(moves)
        G = len(moves.games)
        per = max(1, round(self.batch_size * G / N))  # games per minibatch
        order = torch.randperm(G, generator=self.generator).tolist()
        for s in range(0, G, per):
            chosen = order[s:s + per]
            yield [i for g in chosen for i in range(first[g], first[g + 1])], (chosen, first)

    def _terms(self, moves: Moves, idx: list[int], part: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor],
                                                                          torch.Tensor]:
        """(log ratio, per-move terms, hidden states at the prompts' ends) of one minibatch, differentiable."""
        games, first = part if moves.games is not None else (None, None)
        if moves.ratio == "valid-commands":
            rows, branches = game_branches(moves, games, first) if games is not None else move_branches(moves, idx)
            out = branch_scores(self.model, rows, branches, self.pad_id)
            A, device = out.scores.shape[1], out.scores.device
            log_ratio, terms = policy_terms(out.scores, out.mask, moves.chosen[idx].to(device),
                                            moves.old_scores[idx, :A].to(device),
                                            moves.ref_scores[idx, :A].to(device), self.temperature)
            return log_ratio, terms, out.hidden
        if games is not None:
            logp, mask, hidden = game_logprobs(self.model, [moves.games[g][0] for g in games],
                                               [moves.games[g][1] for g in games], self.pad_id)
        else:
            logp, mask, hidden = move_logprobs(self.model, [moves.prompt_ids[i] for i in idx],
                                               [moves.command_ids[i] for i in idx], self.pad_id)
        K, device = logp.shape[1], logp.device
        log_ratio, terms = token_terms(logp, moves.old_logp[idx, :K].to(device), moves.ref_logp[idx, :K].to(device),
                                       mask)
        return log_ratio, terms, hidden

    def update(self, moves: Moves) -> dict[str, float]:
        """``epochs`` passes over the moves in shuffled minibatches; mean statistics of the last pass, plus
        ``steps`` (optimiser steps taken) and ``stopped_early`` (1 when ``target_kl`` ended the update: a minibatch
        whose approx_kl passed 1.5 x target_kl, checked before its step, which is not taken)."""
        self.model.train()
        stats: list[dict[str, float]] = []
        steps, stopped = 0, False
        for _ in range(self.epochs):
            stats = []
            for idx, part in self._minibatches(moves):
                log_ratio, terms, hidden = self._terms(moves, idx, part)
                device = log_ratio.device
                new_values = self.value_head(hidden.float()).squeeze(-1)  # (b,)
                loss, st = ppo_loss(log_ratio, terms, moves.advantages[idx].to(device), new_values,
                                    moves.values[idx].to(device), moves.returns[idx].to(device), self.clip,
                                    self.value_clip, self.vf_coef, self.kl_coef)
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
