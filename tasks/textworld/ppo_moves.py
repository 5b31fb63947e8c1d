"""An iteration's played moves as PPO's update reads them (:func:`collect_moves`, game-major): GAE advantages and
returns, the behaviour and reference (adapter off) terms of the ratio chosen (``--ppo-ratio``), and the rows /
branches that rescore them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, get_args

import torch

from tasks.textworld.command_scores import MASKED_SCORE, Branch, branch_scores, pad_rows
from tasks.textworld.command_tokens import game_logprobs, move_logprobs
from tasks.textworld.config import PPORatio


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each (N, T), of N episodes padded to T moves (``mask`` 1 on real moves); each episode
    ends after its last real move (next value 0)."""
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


RATIOS = get_args(PPORatio)


@dataclass
class Moves:
    """An iteration's moves, flattened (game-major), with what the update needs; ``ratio`` says which policy terms
    are filled: "valid-commands" the candidate tables, "command-tokens" the chosen command's token tables."""

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
    """Flatten played episodes into :class:`Moves`: GAE from their rewards and values (advantages normalised over the
    iteration), reference terms from the model with its adapter disabled; ``ratio`` as :class:`Moves`."""
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


def rescore(model: Any, moves: Moves, idx: Sequence[int], games: Sequence[int] | None, first: Sequence[int],
            pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the ratio's table: valid-command scores or command token log-probabilities, its mask, hidden states at the
    prompts' ends) of moves ``idx`` (transcripts: they are the moves of ``games``, game g's from ``first[g]``),
    differentiable."""
    if moves.ratio == "valid-commands":
        rows, branches = game_branches(moves, games, first) if games is not None else move_branches(moves, idx)
        out = branch_scores(model, rows, branches, pad_id)
        return out.scores, out.mask, out.hidden
    if games is not None:
        return game_logprobs(model, [moves.games[g][0] for g in games], [moves.games[g][1] for g in games], pad_id)
    return move_logprobs(model, [moves.prompt_ids[i] for i in idx], [moves.command_ids[i] for i in idx], pad_id)


def _reference(moves: Moves, model: Any, pad_id: int, batch: int, width: int, fill: float = 0.0) -> torch.Tensor:
    """The reference's (adapter off) :func:`rescore` table of every move, ``width`` wide (``fill`` past a row's own):
    one forward per transcript game, or per ``batch`` windowed moves."""
    first, N = game_starts(moves), len(moves.prompt_ids)
    chunks = ([(range(first[g], first[g + 1]), [g]) for g in range(len(moves.games))] if moves.games is not None
              else [(range(s, min(s + batch, N)), None) for s in range(0, N, batch)])
    with torch.no_grad(), model.disable_adapter():
        parts = [rescore(model, moves, idx, games, first, pad_id)[0].cpu() for idx, games in chunks]
    return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=fill) for p in parts])


def _candidate_tables(moves: Moves, episodes: Sequence[Any], model: Any, pad_id: int, batch: int) -> None:
    """Fill the "valid-commands" fields: the played choice and scores, the reference scores (adapter off)."""
    if any(len(e.candidate_scores) != len(e) for e in episodes):
        raise ValueError("episodes without their valid commands' scores (play with a TextWorldPolicy records them)")
    moves.candidate_ids = [c for e in episodes for c in e.candidate_ids]
    moves.chosen = torch.tensor([i for e in episodes for i in e.indices], dtype=torch.long)
    A = max(len(c) for c in moves.candidate_ids)
    moves.old_scores = pad_rows([s for e in episodes for s in e.candidate_scores], A, MASKED_SCORE)
    moves.ref_scores = _reference(moves, model, pad_id, batch, A, MASKED_SCORE)


def _token_tables(moves: Moves, episodes: Sequence[Any], model: Any, pad_id: int, batch: int) -> None:
    """Fill the "command-tokens" fields: the played and the reference (adapter off) per-token log-probabilities."""
    K = max(len(c) for c in moves.command_ids)
    moves.old_logp = pad_rows([lp for e in episodes for lp in e.logprobs], K)
    moves.ref_logp = _reference(moves, model, pad_id, batch, K)
    moves.token_mask = pad_rows([[1.0] * len(c) for c in moves.command_ids], K)
