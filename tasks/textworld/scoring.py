"""Scoring every valid command of many games in one batched, cached pass (the acting policy's core).

For B games with prompts of different lengths and different valid-command lists:

1. the prompts, left-padded into one (B, L) batch, run through the decoder once, filling a KV cache; the last
   prompt position gives each game's hidden state (the value head reads it) and the first command token's
   distribution (the LM head runs on that position only);
2. all of a game's candidate commands are packed into one row after its prompt, (B, M) with M = the most
   candidate tokens of any game, and run once over the cache with a 4D attention mask in which a candidate's
   tokens see the prompt and the earlier tokens of the *same* candidate only (position ids restart at the prompt's
   end for every candidate), so every candidate is scored as if it alone followed the prompt.

A command's score is the sum of its tokens' log-probabilities; :func:`full_recompute` scores one prompt + command
with a plain causal forward and is what the tests compare against. Commands are scored as they are written after
``Action:`` in the template: a space, then the command.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

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
    """A 0 / -large float mask from a bool mask (what both eager and sdpa attention add to the scores)."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


def score_candidates(model: Any, tokenizer: Any, prompts: Sequence[str], candidates: Sequence[Sequence[str]],
                     max_prompt_tokens: int = 640) -> Scored:
    """Score every candidate command of every game (see the module docstring); runs with the model as it is
    (wrap in ``torch.no_grad()`` to act)."""
    lm = base_model(model)
    decoder, head = lm.get_decoder(), lm.get_output_embeddings()
    device = next(lm.parameters()).device
    dtype = next(lm.parameters()).dtype
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

    cand_ids, owner, offset = pack_candidates(command_ids, pad)  # (B, M) each
    cand_pos = mask.sum(1, keepdim=True) + offset  # (B, M) every candidate restarts at the prompt's end
    out = decoder(input_ids=cand_ids.to(device), position_ids=cand_pos.to(device), cache=cache, use_cache=True,
                  attention_mask=additive_mask(candidate_attention(mask.bool(), owner)[:, None], dtype).to(device))
    scores, token_logprobs = candidate_logprobs(head, out.last_hidden_state, first_logp, command_ids)
    return Scored(scores, token_logprobs, hidden, prompt_ids, command_ids)


def pack_candidates(command_ids: Sequence[Sequence[Sequence[int]]], pad: int
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each game's candidate commands packed into one row: (token ids, candidate index of each token (-1 = pad),
    position of each token within its candidate), each (B, M) with M the most candidate tokens of any game."""
    B = len(command_ids)
    M = max(sum(len(c) for c in cands) for cands in command_ids)
    cand_ids = torch.full((B, M), pad, dtype=torch.long)
    owner = torch.full((B, M), -1, dtype=torch.long)  # (B, M)
    offset = torch.zeros((B, M), dtype=torch.long)  # (B, M)
    for b, cands in enumerate(command_ids):
        j = 0
        for a, c in enumerate(cands):
            cand_ids[b, j:j + len(c)] = torch.tensor(c)
            owner[b, j:j + len(c)] = a
            offset[b, j:j + len(c)] = torch.arange(len(c))
            j += len(c)
    return cand_ids, owner, offset


def candidate_attention(prompt_mask: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
    """(B, M, L + M) bool: which cached positions (``prompt_mask`` (B, L), True on real tokens) and which packed
    tokens each packed candidate token may attend to: the prompt, and the earlier tokens of its own candidate."""
    B, M = owner.shape
    L = prompt_mask.shape[1]
    same = (owner[:, :, None] == owner[:, None, :]) & (owner[:, :, None] >= 0)  # (B, M, M) same candidate
    causal = torch.ones(M, M, dtype=torch.bool).tril()  # (M, M)
    allowed = torch.cat([prompt_mask[:, None, :].expand(B, M, L), same & causal], 2)  # (B, M, L + M)
    allowed[:, :, L:] |= torch.eye(M, dtype=torch.bool)  # pads attend to themselves (no empty rows)
    return allowed


def candidate_logprobs(head: Any, packed: torch.Tensor, first_logp: torch.Tensor,
                       command_ids: Sequence[Sequence[Sequence[int]]]) -> tuple[list[torch.Tensor],
                                                                              list[list[torch.Tensor]]]:
    """(per game (A_b,) summed scores, per game per candidate (n,) token log-probabilities) from the packed
    candidates' last-layer states ``packed`` (B, M, H) and the first-token log-probabilities after each prompt
    ``first_logp`` (B, V); on the CPU, where the policy samples and logs them."""
    scores, token_logprobs = [], []
    for b, cands in enumerate(command_ids):
        # one game at a time: (M, V) float32 log-probabilities, not (B, M, V) (64 games x 200 packed tokens x a
        # 49k vocabulary would be 2.5 GB)
        logp = torch.log_softmax(head(packed[b]).float(), -1)  # (M, V): next token after each packed token
        per, j = [], 0
        for c in cands:
            target = torch.tensor(c, device=logp.device)
            first = first_logp[b, target[:1]]  # (1,) first token after the prompt
            rest = logp[j:j + len(c) - 1].gather(-1, target[1:, None]).squeeze(-1)  # (n-1,)
            per.append(torch.cat([first, rest]))
            j += len(c)
        token_logprobs.append([t.cpu() for t in per])
        scores.append(torch.stack([t.sum() for t in per]).cpu())
    return scores, token_logprobs


def full_recompute(model: Any, prompt_ids: Sequence[int], command_ids: Sequence[int]) -> torch.Tensor:
    """(n,) log-probabilities of ``command_ids`` after ``prompt_ids`` by one plain causal forward (the reference)."""
    lm = base_model(model)
    device = next(lm.parameters()).device
    ids = torch.tensor([list(prompt_ids) + list(command_ids)], device=device)  # (1, P + n)
    logits = lm(input_ids=ids).logits[0, len(prompt_ids) - 1:-1]  # (n, V) predicting each command token
    return torch.log_softmax(logits.float(), -1).gather(-1, ids[0, len(prompt_ids):, None]).squeeze(-1)
