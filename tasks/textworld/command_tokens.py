"""The chosen command's token log-probabilities under the whole vocabulary (``--ppo-ratio command-tokens``): one
plain causal forward per move, or per transcript game, and the PPO terms taken on them. Cheaper than rescoring
every valid command (:mod:`tasks.textworld.command_scores`), but not the distribution the policy acts by.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from ad.lm.scoring import base_model


def token_terms(new_logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor, token_mask: torch.Tensor
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The chosen command's token terms of B moves from (B, K) token tensors (``token_mask`` 1 on the command): (log
    ratio (B,), per-move terms (B,)): ``kl`` the summed per-token k3 estimate of KL to the reference and ``approx_kl``
    (r - 1) - log r, how far the update moved from the policy that played (CleanRL's)."""
    token_mask = token_mask.to(new_logp.dtype)
    log_ratio = ((new_logp - old_logp) * token_mask).sum(-1)  # (B,)
    d = (ref_logp - new_logp) * token_mask  # (B, K)
    return log_ratio, {"kl": ((d.exp() - d - 1) * token_mask).sum(-1),
                       "approx_kl": (log_ratio.exp() - 1) - log_ratio}


def move_logprobs(model: Any, prompt_ids: Sequence[Sequence[int]], command_ids: Sequence[Sequence[int]],
                  pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token logprobs (B, K), token mask (B, K), hidden state at each prompt's last token (B, H)) of B moves, one
    plain causal forward of prompt + command per row (right-padded): :func:`game_logprobs` of one-move games;
    differentiable."""
    return game_logprobs(model, [list(p) + list(c) for p, c in zip(prompt_ids, command_ids)],
                         [[(len(p), len(p) + len(c))] for p, c in zip(prompt_ids, command_ids)], pad_id)


def game_logprobs(model: Any, sequences: Sequence[Sequence[int]], spans: Sequence[Sequence[tuple[int, int]]],
                  pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What :func:`move_logprobs` returns for every move of G transcript games, game-major, from one forward pass per
    game (right-padded (G, L)): ``sequences[g]`` is game g's transcript through its last command, ``spans[g]`` each
    move's command (start, end) in it (move k's prompt is ``sequences[g][:start]``). Differentiable."""
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
