"""Batched sampling of several completions per prompt with a KV cache: what the math task's fast REINFORCE loop
samples with, usable by any family that samples groups of completions from a causal LM (it lives beside the
families, not in ``models/``, because tasks never import models).

Differences from ``model.generate(..., num_return_sequences=G)`` that make it faster on a CPU, none of which
changes the distribution (``tests/test_math_sampler.py`` checks that):

* **the prompt is read once per group**: each distinct prompt is prefilled once and its keys / values are repeated
  ``G`` times (``generate`` repeats the prompt before the prefill, so it reads it ``G`` times);
* **finished rows leave the batch**: when a row emits EOS it stops costing anything once enough rows have finished
  (``generate`` keeps computing finished rows, padded, until every row is done);
* only the last position's logits are computed, in the prefill as in every step;
* for a Llama model (SmolLM2 is one), decode steps go through :class:`ad.lm.llama_decode.LlamaDecoder`: the
  prompt's keys / values held once per group rather than repeated, fused projections, attention as small float32
  products instead of PyTorch's fused kernel (slow for one query token on a CPU); any other model decodes with its
  own forward and a KV cache that grows in place (:func:`ad.lm.kv_cache.growing_cache`);
* the token is drawn with one uniform number a row against the cumulative probabilities, in two levels (blocks of
  the vocabulary, then inside one block: :func:`draw_categorical`), where ``torch.multinomial`` draws an
  exponential number per vocabulary entry (~30 ms a step for 32 rows of a 49k-token vocabulary on a CPU); the
  log-probabilities are computed once a step and, without top-p, the draw's probabilities are their exponential.

Sampling follows ``generate``'s: logits / temperature, then top-p (the smallest set of tokens whose probability
reaches ``top_p``), then a draw from the resulting categorical distribution. The log-probability recorded for each
token is ``log_softmax(logits / temperature)`` before top-p (the policy's log-probability as trl's RLOO loss
defines it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ad.lm.kv_cache import growing_cache
from ad.lm.llama_decode import LlamaDecoder, supports


@dataclass
class Samples:
    """Completions of one :func:`sample_groups` call, rows grouped by prompt (``G`` consecutive rows per prompt).

    ``tokens[i]``: the completion's token ids (ending with the EOS token if it stopped there), ``logprobs[i]``: the
    behaviour log-probability of each token (float32, same length), ``terminated[i]``: it ended with EOS."""

    tokens: list[list[int]]
    logprobs: list[torch.Tensor]
    terminated: list[bool]


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device: Any = "cpu"
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask, position_ids), each (P, L): token lists left-padded to the longest."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        if len(p):
            ids[i, width - len(p):] = torch.as_tensor(list(p), dtype=torch.long)
            mask[i, width - len(p):] = 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)  # (P, L) first real token at position 0
    return ids.to(device), mask.to(device), positions.to(device)


def filter_top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Logits (B, V) with every token outside the top-p nucleus set to -inf (at least one token kept), as
    ``transformers``' ``TopPLogitsWarper`` does."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=False, dim=-1)  # (B, V) ascending
    cumulative = sorted_logits.softmax(-1).cumsum(-1)
    remove_sorted = cumulative <= (1 - top_p)
    remove_sorted[:, -1] = False  # keep the most likely token
    remove = remove_sorted.scatter(1, order, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def _last_with_mass(cumulative: torch.Tensor) -> torch.Tensor:
    """(B, 1) the last index of each row of a cumulative sum (B, N) whose entry adds probability (> 0)."""
    return (cumulative < cumulative[:, -1:]).sum(-1, keepdim=True)


def draw_categorical(probs: torch.Tensor, generator: torch.Generator | None = None, block: int = 256
                     ) -> torch.Tensor:
    """One index per row of ``probs`` (B, V) (non-negative, rows summing to ~1), row i drawn with probability
    ``probs[i, j]``, by inverse CDF in two levels: a uniform draw scaled to the row's total picks a block of
    ``block`` consecutive indices by the blocks' cumulative mass (float64), then an index inside the block by the
    block's own cumulative probabilities (float64), so only the block sums and one block a row are accumulated, not
    the whole vocabulary. Zero-probability indices are never drawn. Returns (B,) int64."""
    rows, size = probs.shape
    pad = (-size) % block
    padded = torch.nn.functional.pad(probs, (0, pad)) if pad else probs  # (B, nb * block)
    cells = padded.view(rows, -1, block)  # (B, nb, block)
    mass = cells.sum(-1, dtype=torch.float64)  # (B, nb) each block's probability
    upto = mass.cumsum(-1)  # (B, nb)
    u = torch.rand((rows, 1), generator=generator, dtype=torch.float64, device=probs.device) * upto[:, -1:]
    chosen = torch.minimum(torch.searchsorted(upto, u, right=True), _last_with_mass(upto))  # (B, 1) block past u
    own = mass.gather(1, chosen)  # (B, 1) > 0: the block holds u's point of the row's mass
    inside = ((u - (upto.gather(1, chosen) - own)) / own).clamp_(0, 1)  # (B, 1) uniform share of the block's mass
    cdf = cells.gather(1, chosen[:, :, None].expand(rows, 1, block))[:, 0].double().cumsum(-1)  # (B, block)
    index = torch.minimum(torch.searchsorted(cdf, inside * cdf[:, -1:], right=True), _last_with_mass(cdf))  # (B, 1)
    return (chosen * block + index)[:, 0]  # (B,)


@torch.no_grad()
def sample_groups(model: Any, prompts: Sequence[Sequence[int]], num_samples: int, max_new_tokens: int, *,
                  eos_ids: Sequence[int], pad_id: int, temperature: float = 1.0, top_p: float = 1.0,
                  greedy: bool = False, generator: torch.Generator | None = None, compact_below: float = 0.75,
                  fast_decode: bool = True) -> Samples:
    """``num_samples`` completions of each prompt (token id lists), at most ``max_new_tokens`` tokens each, a row
    stopping at its first token in ``eos_ids``. ``greedy``: the most likely token instead of a draw (every row of a
    group then equal). Finished rows are dropped from the batch once the live rows are fewer than
    ``compact_below`` of it. ``fast_decode``: decode with :class:`ad.lm.llama_decode.LlamaDecoder` where the model
    allows it (a Llama; otherwise, or with False, the model's own forward with a KV cache). Returns rows in prompt
    order, ``num_samples`` per prompt."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        ids, mask, positions = left_pad(prompts, pad_id, device)
        decoder = LlamaDecoder(model) if fast_decode and supports(model) else None
        if decoder is not None:  # the prompt's keys / values held once per group
            logits = decoder.prefill(ids, mask, positions, num_samples, max_new_tokens)  # (P * G, V)
        else:
            cache = growing_cache()  # keys / values written in place, not concatenated every step
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                        logits_to_keep=1)
            logits = out.logits[:, -1].float()  # (P, V)
            if num_samples > 1:  # every prompt's cache repeated for its group
                cache.batch_repeat_interleave(num_samples)
                logits = logits.repeat_interleave(num_samples, 0)  # (P * G, V)
        mask = mask.repeat_interleave(num_samples, 0)  # (P * G, L)
        positions = positions.repeat_interleave(num_samples, 0)
        n = logits.size(0)
        rows = torch.arange(n, device=device)  # (B,) original row of each live batch row
        next_position = positions[:, -1] + 1  # (B,)
        tokens = torch.full((n, max_new_tokens), pad_id, dtype=torch.long, device=device)  # (N, T) filled per row
        logps = torch.zeros((n, max_new_tokens), dtype=torch.float32, device=device)
        lengths = torch.zeros(n, dtype=torch.long, device=device)
        done = torch.zeros(n, dtype=torch.bool, device=device)
        eos = torch.as_tensor(sorted(set(int(e) for e in eos_ids)), dtype=torch.long, device=device)
        active = torch.ones(n, dtype=torch.bool, device=device)  # (B,) batch rows still generating
        for t in range(max_new_tokens):
            scaled = logits / temperature if temperature != 1.0 else logits  # (B, V)
            logp_all = scaled.log_softmax(-1)  # (B, V) the policy's log-probabilities
            if greedy:
                chosen = scaled.argmax(-1)
            else:
                probs = logp_all.exp() if top_p >= 1.0 else filter_top_p(scaled, top_p).softmax(-1)
                chosen = draw_categorical(probs, generator)  # (B,)
            lp = logp_all.gather(1, chosen[:, None])[:, 0]  # (B,)
            where = rows[active]
            tokens[where, t] = chosen[active]
            logps[where, t] = lp[active]
            lengths[where] = t + 1
            finished = torch.isin(chosen, eos) & active if eos.numel() else torch.zeros_like(active)
            done[rows[finished]] = True
            active = active & ~finished
            if t + 1 == max_new_tokens or not bool(active.any()):
                break
            if int(active.sum()) < compact_below * len(rows):  # drop finished rows from the batch and the cache
                keep = active.nonzero()[:, 0]
                if decoder is not None:
                    decoder.select(keep)
                else:
                    cache.batch_select_indices(keep)
                rows, chosen, mask, next_position = rows[keep], chosen[keep], mask[keep], next_position[keep]
                active = active[keep]
            if decoder is not None:
                logits = decoder.step(chosen, next_position)
            else:
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)  # (B, L + t + 1); finished rows ignored
                out = model(input_ids=chosen[:, None], attention_mask=mask, position_ids=next_position[:, None],
                            cache=cache, use_cache=True, logits_to_keep=1)
                logits = out.logits[:, -1].float()
            next_position = next_position + 1
        tokens_list = tokens.cpu().tolist()
        lengths_list = lengths.cpu().tolist()
        return Samples(tokens=[row[:k] for row, k in zip(tokens_list, lengths_list)],
                       logprobs=[logps[i, :k].cpu() for i, k in enumerate(lengths_list)],
                       terminated=done.cpu().tolist())
    finally:
        model.train(was_training)
