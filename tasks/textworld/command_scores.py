"""Every valid command's score at many moves, with gradients, from one forward pass per row: what PPO's update
needs to train the distribution the policy acts by, softmax over the valid commands' summed token log-probabilities
(``--ppo-ratio valid-commands``).

A *row* is a token sequence with one or more *branches*, each a point in the row where a move's command starts and
that move's valid commands: a windowed move is a row (its prompt) with one branch at its end; a transcript game is
one row (the whole game) with a branch at every move. Each branch's candidate prefix tree
(:class:`ad.lm.scoring.CandidateTrie`: shared prefixes fed once, no command's last token fed) is appended
after the row, and the row runs once through the decoder with a 4D mask: the row's tokens are causal, a node sees
the row up to its branch and its own ancestors, at position branch + depth. So every command is scored as if it
alone followed its prompt, exactly as acting scores it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from ad.lm.scoring import additive_mask, base_model, candidate_trie

#: Score of a padding slot of the (N, A) candidate tables: exp() of it is 0 in float32, arithmetic stays finite.
MASKED_SCORE = -1e9


@dataclass
class Branch:
    """One move inside a row: its prompt is ``row[:at]``, ``commands`` the valid commands' token ids."""

    row: int
    at: int
    commands: Sequence[Sequence[int]]


@dataclass
class BranchScores:
    """What :func:`branch_scores` returns for N branches."""

    scores: torch.Tensor  #: (N, A) summed log-probabilities of each branch's commands, MASKED_SCORE past its own
    mask: torch.Tensor  #: (N, A) True on real commands
    hidden: torch.Tensor  #: (N, H) last-layer hidden state at each branch's last prompt token (the value head's input)


def branch_scores(model: Any, rows: Sequence[Sequence[int]], branches: Sequence[Branch], pad: int) -> BranchScores:
    """Score every command of every branch in one forward pass over all rows (right-padded (R, S), S = the longest
    row with its branches' nodes); differentiable. A branch's ``at`` must be >= 1 and <= its row's length."""
    lm = base_model(model)
    decoder, head = lm.get_decoder(), lm.get_output_embeddings()
    device = next(lm.parameters()).device
    trie = candidate_trie([b.commands for b in branches], pad)
    counts = [1 + max((n for path in paths for n in path), default=-1) for paths in trie.nodes]  # real nodes each
    offsets, lengths = [], [len(r) for r in rows]
    for b, n in zip(branches, counts):
        if not 1 <= b.at <= len(rows[b.row]):
            raise ValueError(f"a branch at {b.at} of a row of {len(rows[b.row])} tokens: its prompt must be a "
                             "non-empty prefix of the row")
        offsets.append(lengths[b.row])  # this branch's nodes follow the row and the earlier branches' nodes
        lengths[b.row] += n
    R, S = len(rows), max(lengths)
    ids = np.full((R, S), pad, dtype=np.int64)
    positions = np.zeros((R, S), dtype=np.int64)
    allowed = np.zeros((R, S, S), dtype=bool)
    allowed[:, np.arange(S), np.arange(S)] = True  # every slot sees itself (padding rows stay finite)
    for r, row in enumerate(rows):
        n = len(row)
        ids[r, :n], positions[r, :n] = row, np.arange(n)
        allowed[r, :n, :n] = np.tril(np.ones((n, n), dtype=bool))  # the row is causal
    t_ids, t_depth, t_anc = trie.ids.numpy(), trie.depth.numpy(), trie.ancestors.numpy()
    for k, (b, o, n) in enumerate(zip(branches, offsets, counts)):
        ids[b.row, o:o + n] = t_ids[k, :n]
        positions[b.row, o:o + n] = b.at + t_depth[k, :n]
        allowed[b.row, o:o + n, :b.at] = True  # a node sees its prompt ...
        allowed[b.row, o:o + n, o:o + n] = t_anc[k, :n, :n]  # ... and its own ancestors (itself included)
    mask = additive_mask(torch.from_numpy(allowed).to(device)[:, None], head.weight.dtype)  # (R, 1, S, S)
    hidden = decoder(input_ids=torch.from_numpy(ids).to(device), position_ids=torch.from_numpy(positions).to(device),
                     attention_mask=mask).last_hidden_state  # (R, S, H)

    # the positions whose next-token distribution is read: each branch's last prompt token (every command's first
    # token), then each node (the token after that prefix); and per command token, which position and which token
    read_row, read_pos = [b.row for b in branches], [b.at - 1 for b in branches]  # (N,) first the prompts' ends
    for b, o, n in zip(branches, offsets, counts):
        read_row += [b.row] * n
        read_pos += range(o, o + n)
    node_base = np.cumsum([len(branches)] + counts[:-1]).tolist()  # branch k's node i is read at node_base[k] + i
    A = max((len(b.commands) for b in branches), default=0)
    where, token, slot = [], [], []  # per command token: read index, token id, flat (branch, command) slot
    for k, (b, paths) in enumerate(zip(branches, trie.nodes)):
        for a, (c, path) in enumerate(zip(b.commands, paths)):
            where += [k] + [node_base[k] + i for i in path]
            token += list(c)
            slot += [k * A + a] * len(c)
    rows_t, pos_t = torch.tensor(read_row, device=device), torch.tensor(read_pos, device=device)
    logp = torch.log_softmax(head(hidden[rows_t, pos_t]).float(), -1)  # (P, V) every read position
    token_logp = logp[torch.tensor(where, device=device), torch.tensor(token, device=device)]  # (T,)
    flat = torch.zeros(len(branches) * A, device=device).index_add(0, torch.tensor(slot, device=device), token_logp)
    real = (torch.arange(A)[None] < torch.tensor([len(b.commands) for b in branches])[:, None]).to(device)  # (N, A)
    scores = flat.view(len(branches), A).masked_fill(~real, MASKED_SCORE)  # (N, A)
    return BranchScores(scores, real, hidden[rows_t[:len(branches)], pos_t[:len(branches)]])


def policy_terms(scores: torch.Tensor, mask: torch.Tensor, chosen: torch.Tensor, old_scores: torch.Tensor,
                 ref_scores: torch.Tensor, temperature: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The acting distribution's PPO terms of B moves, pi = softmax(scores / temperature) over the valid commands
    (``mask`` (B, A)): (log ratio (B,) of the chosen commands, per-move terms (B,)): ``kl`` the exact KL(pi_new ||
    pi_ref), ``approx_kl`` the exact KL(pi_old || pi_new) and ``entropy`` of pi_new, each summed over valid commands."""
    def log_pi(s: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax((s.float() / temperature).masked_fill(~mask, MASKED_SCORE), -1)  # (B, A)

    new, old, ref = log_pi(scores), log_pi(old_scores), log_pi(ref_scores)
    p_new, p_old = new.exp(), old.exp()  # (B, A), 0 on padding
    log_ratio = (new - old).gather(-1, chosen[:, None]).squeeze(-1)  # (B,)
    zero = torch.zeros((), device=new.device)
    terms = {"kl": torch.where(mask, p_new * (new - ref), zero).sum(-1),
             "approx_kl": torch.where(mask, p_old * (old - new), zero).sum(-1),
             "entropy": torch.where(mask, -p_new * new, zero).sum(-1)}
    return log_ratio, terms


def pad_rows(rows: Sequence[Sequence[float]], width: int, fill: float = 0.0) -> torch.Tensor:
    """(N, width) float32 tensor of variable-length rows, ``fill`` past each row (MASKED_SCORE for score tables)."""
    out = torch.full((len(rows), width), fill)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(list(r), dtype=torch.float32)
    return out
