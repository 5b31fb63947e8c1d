"""Scoring every valid command of many games in one batched, cached pass (the acting policy's core).

The shared valid-action scorer (:mod:`ad.lm.scoring`) runs the B left-padded prompts once into a KV cache (the last
prompt position gives the value head's hidden state), then every game's commands as one prefix tree over it, so
every command is scored as if it alone followed its prompt: the sum of its tokens' log-probabilities, written as
after ``Action:`` in the template (a space, then the command). This module holds what is TextWorld's own: how
prompts and commands are tokenised, and what a scoring pass returns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ad.lm.scoring import CachedContexts
from ad.lm.scoring import candidate_trie, full_recompute, score_candidates_after  # noqa: F401  (tests' names)
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


def score_candidates(model: Any, tokenizer: Any, prompts: Sequence[str], candidates: Sequence[Sequence[str]],
                     max_prompt_tokens: int = 640) -> Scored:
    """Score every candidate command of every game (see the module docstring); runs with the model as it is
    (wrap in ``torch.no_grad()`` to act)."""
    prompt_ids = encode_prompts(tokenizer, prompts, max_prompt_tokens)
    command_ids = [encode_commands(tokenizer, c) for c in candidates]
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    contexts = CachedContexts(model, pad, len(prompt_ids))
    hidden = contexts.extend(prompt_ids)  # (B, H)
    scores, token_logprobs = contexts.score(contexts.next_logp(hidden), command_ids)
    return Scored(scores, token_logprobs, hidden, prompt_ids, command_ids)
