"""Scoring every valid command of many games in one batched, cached pass (the acting policy's core).

For B games with prompts of different lengths and different valid-command lists:

1. the prompts, left-padded into one (B, L) batch, run through the decoder once, filling a KV cache; the last
   prompt position gives each game's hidden state (the value head reads it) and the first command token's
   distribution (the LM head runs on that position only);
2. all of a game's candidate commands are packed into one row after its prompt as a prefix tree
   (:class:`CandidateTrie`: shared prefixes fed once, no command's last token fed), (B, M) with M the most nodes
   of any game, and run once over the cache with a 4D attention mask in which a node sees the prompt and its own
   ancestors only (position ids restart at the prompt's end for every command), so every candidate is scored as
   if it alone followed the prompt.

A command's score is the sum of its tokens' log-probabilities; :func:`full_recompute` scores one prompt + command
with a plain causal forward and is what the tests compare against. Commands are scored as they are written after
``Action:`` in the template: a space, then the command.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from tasks.textworld.prompts import split_head


@dataclass
class Scored:
    """What one scoring pass returns for B games."""

    scores: list[torch.Tensor]  #: per game, (A_b,) summed log-probabilities of its candidates
    token_logprobs: list[list[torch.Tensor]]  #: per game, per candidate, (n_tokens,) log-probabilities
    hidden: torch.Tensor  #: (B, H) last-layer hidden state at each prompt's last token
    prompt_ids: list[list[int]]  #: per game, the prompt tokens fed (after left truncation)
    command_ids: list[list[list[int]]]  #: per game, per candidate, the command tokens


def encode_prompts(tokenizer: Any, prompts: Sequence[str], max_tokens: int) -> list[list[int]]:
    """Token ids of each prompt, at most ``max_tokens``. A longer prompt keeps its head whole (task, move list,
    pinned results: :func:`tasks.textworld.prompts.split_head`) and loses the oldest tokens of its shown steps;
    only a head longer than half the budget is itself cut from the left (the steps then keep the other half)."""
    whole = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    out = []
    for prompt, ids in zip(prompts, whole):
        if len(ids) <= max_tokens:
            out.append(list(ids))
            continue
        head, steps = (tokenizer(part, add_special_tokens=False)["input_ids"] for part in split_head(prompt))
        head_room = max(max_tokens - len(steps), max_tokens // 2)  # the head keeps what the steps leave, >= half
        head = head[max(0, len(head) - head_room):]
        steps = steps[max(0, len(steps) - (max_tokens - len(head))):]
        out.append(list(head) + list(steps))
    return out


def encode_commands(tokenizer: Any, commands: Sequence[str]) -> list[list[int]]:
    """Token ids of each command as it follows ``Action:`` (a leading space)."""
    return [list(x) for x in tokenizer([f" {c}" for c in commands], add_special_tokens=False)["input_ids"]]


def base_model(model: Any) -> Any:
    """The transformers causal LM under a peft wrapper (the LoRA layers stay active inside it)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A 0 / -large float mask from a bool mask (what both eager and sdpa attention add to the scores), on the
    bool mask's device."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def score_candidates(model: Any, tokenizer: Any, prompts: Sequence[str], candidates: Sequence[Sequence[str]],
                     max_prompt_tokens: int = 640) -> Scored:
    """Score every candidate command of every game (see the module docstring); runs with the model as it is
    (wrap in ``torch.no_grad()`` to act)."""
    lm = base_model(model)
    decoder, head = lm.get_decoder(), lm.get_output_embeddings()
    device = next(lm.parameters()).device
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    prompt_ids = encode_prompts(tokenizer, prompts, max_prompt_tokens)
    command_ids = [encode_commands(tokenizer, c) for c in candidates]
    B, L = len(prompt_ids), max(len(p) for p in prompt_ids)
    ids = torch.full((B, L), pad, dtype=torch.long)
    mask = torch.zeros((B, L), dtype=torch.long)
    for b, p in enumerate(prompt_ids):
        ids[b, L - len(p):], mask[b, L - len(p):] = torch.tensor(p), 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)  # (B, L) pads skipped
    from transformers import DynamicCache

    cache = DynamicCache()
    out = decoder(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                  cache=cache, use_cache=True)
    hidden = out.last_hidden_state[:, -1]  # (B, H)
    first_logp = torch.log_softmax(head(hidden).float(), -1)  # (B, V)

    scores, token_logprobs, _ = score_candidates_after(decoder, head, cache, mask.bool(), mask.sum(1), first_logp,
                                                       command_ids, pad)
    return Scored(scores, token_logprobs, hidden, prompt_ids, command_ids)


@dataclass
class CandidateTrie:
    """Every game's candidate commands as one prefix tree of the tokens that must be fed: each distinct proper
    prefix of a command (its tokens but the last) is one node, so "examine cookbook" and "examine counter" share
    the " examine" node and no command's last token is fed (its output predicts nothing that is scored). On
    CookingWorld's ~36 valid commands a move this feeds ~46 tokens where packing every command's tokens fed ~128."""

    ids: torch.Tensor  #: (B, M) each node's last token (pad past a game's nodes)
    depth: torch.Tensor  #: (B, M) that token's position within its command
    ancestors: torch.Tensor  #: (B, M, M) node j is node i or one of its ancestors (the tokens node i sees)
    nodes: list[list[list[int]]]  #: per game, per command, the node of each prefix c[:k + 1], k < len(c) - 1


def candidate_trie(command_ids: Sequence[Sequence[Sequence[int]]], pad: int) -> CandidateTrie:
    """The :class:`CandidateTrie` of B games' tokenised candidate commands."""
    tables: list[dict[tuple[int, ...], int]] = []
    nodes: list[list[list[int]]] = []
    for cands in command_ids:
        table: dict[tuple[int, ...], int] = {}
        nodes.append([[table.setdefault(tuple(c[:k + 1]), len(table)) for k in range(len(c) - 1)] for c in cands])
        tables.append(table)
    B, M = len(command_ids), max((len(t) for t in tables), default=0)
    ids = np.full((B, M), pad, dtype=np.int64)  # filled in numpy: per-element torch writes cost ~100x more
    depth = np.zeros((B, M), dtype=np.int64)
    ancestors = np.zeros((B, M, M), dtype=bool)
    for b, table in enumerate(tables):
        for prefix, i in table.items():
            ids[b, i], depth[b, i] = prefix[-1], len(prefix) - 1
            ancestors[b, i, [table[prefix[:k]] for k in range(1, len(prefix) + 1)]] = True  # shorter prefixes
    return CandidateTrie(torch.from_numpy(ids), torch.from_numpy(depth), torch.from_numpy(ancestors), nodes)


def score_candidates_after(decoder: Any, head: Any, cache: Any, prompt_mask: torch.Tensor,
                           prompt_length: torch.Tensor, first_logp: torch.Tensor,
                           command_ids: Sequence[Sequence[Sequence[int]]], pad: int
                           ) -> tuple[list[torch.Tensor], list[list[torch.Tensor]], int]:
    """Score B games' candidates after prompts already in ``cache`` (``prompt_mask`` (B, L) True on real tokens,
    ``prompt_length`` (B,) real tokens, ``first_logp`` (B, V) the next-token log-probabilities after each prompt):
    the candidates' trie runs once over the cache, each node seeing the prompt and its own ancestors, at position
    prompt length + depth, so every command is scored as if it alone followed its prompt. Returns (per game (A_b,)
    summed scores, per game per command (n,) token log-probabilities, nodes fed to the cache), on the CPU."""
    trie = candidate_trie(command_ids, pad)
    B, M = trie.ids.shape
    device = first_logp.device
    hidden = None
    if M:
        L = prompt_mask.shape[1]
        ancestors = trie.ancestors.to(device) | torch.eye(M, dtype=torch.bool, device=device)  # pads see themselves
        # (B, M, L + M), built on the device: on a GPU the float mask of long transcripts is ~60 MB a move
        allowed = torch.cat([prompt_mask.to(device)[:, None, :].expand(B, M, L), ancestors], 2)
        dtype = head.weight.dtype
        hidden = decoder(input_ids=trie.ids.to(device), position_ids=(prompt_length[:, None] + trie.depth).to(device),
                         attention_mask=additive_mask(allowed[:, None], dtype), cache=cache,
                         use_cache=True).last_hidden_state  # (B, M, H)
    # every command's first token is read after its prompt, each later token at the node of the prefix before it;
    # gathered on the device in one index per game, brought to the CPU once
    game = torch.tensor([b for b, cands in enumerate(command_ids) for _ in cands], dtype=torch.long)  # (A,)
    firsts = torch.tensor([c[0] for cands in command_ids for c in cands], dtype=torch.long)  # (A,)
    first = first_logp[game.to(device), firsts.to(device)]  # (A,)
    rest = []
    for b, cands in enumerate(command_ids):
        rows = [node for path in trie.nodes[b] for node in path]
        if rows:  # one game at a time: (M, V) float32 log-probabilities, not (B, M, V)
            logp = torch.log_softmax(head(hidden[b]).float(), -1)  # (M, V)
            later = [t for c in cands for t in c[1:]]
            rest.append(logp[torch.tensor(rows, device=device), torch.tensor(later, device=device)])  # (n_b,)
    first = first.cpu()
    rest_all = torch.cat(rest).cpu() if rest else first[:0]  # (sum of later tokens,) in command order
    scores, token_logprobs, a, r = [], [], 0, 0
    for cands in command_ids:
        per = []
        for c in cands:
            per.append(torch.cat([first[a:a + 1], rest_all[r:r + len(c) - 1]]))  # (n,)
            a, r = a + 1, r + len(c) - 1
        token_logprobs.append(per)
        scores.append(torch.stack([t.sum() for t in per]))
    return scores, token_logprobs, M


def full_recompute(model: Any, prompt_ids: Sequence[int], command_ids: Sequence[int]) -> torch.Tensor:
    """(n,) log-probabilities of ``command_ids`` after ``prompt_ids`` by one plain causal forward (the reference)."""
    lm = base_model(model)
    device = next(lm.parameters()).device
    ids = torch.tensor([list(prompt_ids) + list(command_ids)], device=device)  # (1, P + n)
    logits = lm(input_ids=ids).logits[0, len(prompt_ids) - 1:-1]  # (n, V) predicting each command token
    return torch.log_softmax(logits.float(), -1).gather(-1, ids[0, len(prompt_ids):, None]).squeeze(-1)
