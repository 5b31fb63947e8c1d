"""Scoring valid actions with a causal LM: many contexts in one KV cache, every candidate scored in one pass.

What every LM that acts in an env needs (the Language-format policy of ``models.lm``, TextWorld's command scorer,
the grid world's move-list actor), written once: :class:`CachedContexts` holds B token contexts in one KV cache,
and :func:`candidate_logprobs` scores every context's candidate actions after them in one pass over a prefix tree
(:class:`CandidateTrie`). :func:`full_recompute` is the reference: one plain causal forward, no cache, no padding.

It lives in the core because it is the one layer both of its users may import (``models.lm`` imports no task and
tasks import no model); it scores token lists, and each family says what its actions' tokens are.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch


def base_model(model: Any) -> Any:
    """The transformers causal LM under a peft wrapper (the LoRA layers stay active inside it)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A 0 / -large float mask from a bool mask (what both eager and sdpa attention add to the scores), on the
    bool mask's device."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L) ids and attention mask (long, 1 on real tokens) of sequences aligned on their last token."""
    length = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), length), dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, length - len(s):] = torch.as_tensor(np.asarray(s, dtype=np.int64))
            mask[i, length - len(s):] = 1
    return ids, mask


def shared_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    """Tokens every sequence starts with, leaving at least one token of each for its own tail."""
    shortest = min(len(s) for s in seqs)
    length = 0
    while length < shortest - 1 and all(s[length] == seqs[0][length] for s in seqs):
        length += 1
    return length


class CachedContexts:
    """B token contexts of one causal LM (maybe peft-wrapped) in one KV cache, extended together.

    ``mask`` (B, L) is True on the real (not padding) tokens cached, ``count`` (B,) the real tokens of each context
    (the position id of its next token). ``cache`` defaults to a transformers ``DynamicCache``; pass another
    (:func:`ad.lm.kv_cache.growing_cache`) to grow it in place.
    """

    def __init__(self, model: Any, pad_id: int, num_contexts: int, cache: Any = None):
        lm = base_model(model)
        self.decoder, self.head = lm.get_decoder(), lm.get_output_embeddings()
        self.device = next(lm.parameters()).device
        self.pad_id = int(pad_id)
        if cache is None:
            from transformers import DynamicCache

            cache = DynamicCache()
        self.cache = cache
        self.mask = torch.zeros((num_contexts, 0), dtype=torch.bool)  # (B, L)
        self.count = torch.zeros(num_contexts, dtype=torch.long)  # (B,)

    def extend(self, seqs: Sequence[Sequence[int]]) -> torch.Tensor:
        """Feed each context's new tokens (one non-empty sequence per context, left-padded into one (B, D) chunk);
        returns the last-layer hidden state (B, H) at each context's newest token."""
        return self.feed(*left_pad(seqs, self.pad_id))

    def feed(self, ids: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        """:meth:`extend` by a chunk already left-padded: ``ids`` (B, D) and ``chunk`` (B, D) 1 on real tokens."""
        positions = self.count[:, None] + (chunk.cumsum(1) - 1).clamp(min=0)  # (B, D) pads skipped
        mask = torch.cat([self.mask, chunk.bool()], 1)  # (B, L + D)
        out = self.decoder(input_ids=ids.to(self.device), attention_mask=mask.long().to(self.device),
                           position_ids=positions.to(self.device), cache=self.cache, use_cache=True)
        self.mask, self.count = mask, self.count + chunk.sum(1)
        return out.last_hidden_state[:, -1]  # (B, H)

    def start(self, seqs: Sequence[Sequence[int]]) -> torch.Tensor:
        """:meth:`extend` a fresh batch by whole sequences, running the opening they all share once: its keys and
        values are computed for one row and repeated for every context."""
        if self.mask.shape[1]:
            raise ValueError("start() begins a fresh batch; use extend() to add tokens to cached contexts")
        B = len(seqs)
        shared = shared_prefix_length(seqs) if B > 1 else 0
        if shared:
            self.mask, self.count = self.mask[:1], self.count[:1]
            self.extend([seqs[0][:shared]])
            self.repeat(B)
        return self.extend([s[shared:] for s in seqs])

    def repeat(self, n: int) -> None:
        """Every context repeated ``n`` times in place (row b becomes rows b*n .. b*n + n - 1)."""
        self.cache.batch_repeat_interleave(n)
        self.mask, self.count = self.mask.repeat_interleave(n, 0), self.count.repeat_interleave(n)

    def select(self, rows: Sequence[int]) -> None:
        """Keep only the contexts ``rows``, in that order."""
        index = torch.as_tensor(list(rows), dtype=torch.long)
        self.cache.batch_select_indices(index.to(self.device))
        self.mask, self.count = self.mask[index], self.count[index]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 next-token logits (B, V) from hidden states (B, H): the LM head on those rows only."""
        # a contiguous copy: a strided view makes torch's CPU matmul ~250x slower in bfloat16 for a 49k-word head
        return self.head(hidden.contiguous()).float()

    def next_logp(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 next-token log-probabilities (B, V) from hidden states (B, H)."""
        return torch.log_softmax(self.logits(hidden), -1)

    def score(self, first_logp: torch.Tensor, candidates: Sequence[Sequence[Sequence[int]]]
              ) -> tuple[list[torch.Tensor], list[list[torch.Tensor]]]:
        """Score every context's candidate token lists after it (``first_logp`` (B, V): :meth:`next_logp` of the
        newest hidden states); the cache is left as it was. Returns, per context, the (A_b,) summed scores and per
        candidate its (n,) token log-probabilities, on the CPU."""
        scores, token_logprobs, fed = score_candidates_after(self.decoder, self.head, self.cache, self.mask,
                                                             self.count, first_logp, candidates, self.pad_id)
        self._crop(fed)
        return scores, token_logprobs

    def score_table(self, first_logp: torch.Tensor, candidates: Sequence[Sequence[Sequence[int]]]) -> torch.Tensor:
        """:meth:`score` as one (B, A) table of summed scores, A the most candidates of a context (-inf past a
        context's own); no per-candidate tensors are built (acting in many envs every step)."""
        if all(cands is candidates[0] for cands in candidates) and all(len(c) == 1 for c in candidates[0]):
            # the same one-token candidates after every context (a discrete action set): nothing to feed
            return first_logp[:, [int(c[0]) for c in candidates[0]]].cpu()  # (B, A)
        first, rest, fed = candidate_logprobs(self.decoder, self.head, self.cache, self.mask, self.count, first_logp,
                                              candidates, self.pad_id)
        self._crop(fed)
        B, A = len(candidates), max(len(cands) for cands in candidates)
        slots = [b * A + a for b, cands in enumerate(candidates) for a in range(len(cands))]  # (A_all,)
        table = torch.full((B * A,), float("-inf"), dtype=first.dtype)
        table[torch.tensor(slots, dtype=torch.long)] = first
        if len(rest):  # every later token added to its candidate's slot
            later = [s for s, c in zip(slots, (c for cands in candidates for c in cands)) for _ in range(len(c) - 1)]
            table.index_add_(0, torch.tensor(later, dtype=torch.long), rest)
        return table.view(B, A)

    def _crop(self, fed: int) -> None:
        if fed:
            self.cache.crop(-fed)  # the candidates' keys and values go: the contexts stay cached


@dataclass
class CandidateTrie:
    """Every context's candidates as one prefix tree of the tokens that must be fed: each distinct proper prefix
    of a candidate (its tokens but the last) is one node, so "examine cookbook" and "examine counter" share the
    " examine" node and no candidate's last token is fed (its output predicts nothing that is scored). On
    CookingWorld's ~36 valid commands a move this feeds ~46 tokens where packing every command's tokens fed ~128."""

    ids: torch.Tensor  #: (B, M) each node's last token (pad past a context's nodes)
    depth: torch.Tensor  #: (B, M) that token's position within its candidate
    ancestors: torch.Tensor  #: (B, M, M) node j is node i or one of its ancestors (the tokens node i sees)
    nodes: list[list[list[int]]]  #: per context, per candidate, the node of each prefix c[:k + 1], k < len(c) - 1


def candidate_trie(command_ids: Sequence[Sequence[Sequence[int]]], pad: int) -> CandidateTrie:
    """The :class:`CandidateTrie` of B contexts' tokenised candidates."""
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


def candidate_logprobs(decoder: Any, head: Any, cache: Any, prompt_mask: torch.Tensor, prompt_length: torch.Tensor,
                       first_logp: torch.Tensor, command_ids: Sequence[Sequence[Sequence[int]]], pad: int
                       ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Log-probabilities of B contexts' candidates after contexts already in ``cache`` (``prompt_mask`` (B, L) True
    on real tokens, ``prompt_length`` (B,) real tokens, ``first_logp`` (B, V) the next-token log-probabilities
    after each context): the candidates' trie runs once over the cache, each node seeing the context and its own
    ancestors, at position context length + depth, so every candidate is scored as if it alone followed its
    context. Returns (first (A,) every candidate's first token, rest (R,) every later token candidate by candidate,
    nodes fed to the cache, which the caller crops off), on the CPU; A counts the candidates of all contexts."""
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
    # every candidate's first token is read after its context, each later token at the node of the prefix before
    # it; gathered on the device in one index per context, brought to the CPU once
    game = torch.tensor([b for b, cands in enumerate(command_ids) for _ in cands], dtype=torch.long)  # (A,)
    firsts = torch.tensor([int(c[0]) for cands in command_ids for c in cands], dtype=torch.long)  # (A,)
    first = first_logp[game.to(device), firsts.to(device)]  # (A,)
    rest = []
    for b, cands in enumerate(command_ids):
        rows = [node for path in trie.nodes[b] for node in path]
        if rows:  # one context at a time: (M, V) float32 log-probabilities, not (B, M, V)
            logp = torch.log_softmax(head(hidden[b]).float(), -1)  # (M, V)
            later = [int(t) for c in cands for t in c[1:]]
            rest.append(logp[torch.tensor(rows, device=device), torch.tensor(later, device=device)])  # (n_b,)
    first = first.cpu()
    return first, torch.cat(rest).cpu() if rest else first[:0], M


def score_candidates_after(decoder: Any, head: Any, cache: Any, prompt_mask: torch.Tensor,
                           prompt_length: torch.Tensor, first_logp: torch.Tensor,
                           command_ids: Sequence[Sequence[Sequence[int]]], pad: int
                           ) -> tuple[list[torch.Tensor], list[list[torch.Tensor]], int]:
    """:func:`candidate_logprobs` per candidate: (per context (A_b,) summed scores, per context per candidate (n,)
    token log-probabilities, nodes fed to the cache), on the CPU."""
    first, rest, fed = candidate_logprobs(decoder, head, cache, prompt_mask, prompt_length, first_logp, command_ids,
                                          pad)
    scores, token_logprobs, a, r = [], [], 0, 0
    for cands in command_ids:
        per = []
        for c in cands:
            per.append(torch.cat([first[a:a + 1], rest[r:r + len(c) - 1]]))  # (n,)
            a, r = a + 1, r + len(c) - 1
        token_logprobs.append(per)
        scores.append(torch.stack([t.sum() for t in per]))
    return scores, token_logprobs, fed


def full_recompute(model: Any, prompt_ids: Sequence[int], command_ids: Sequence[int]) -> torch.Tensor:
    """(n,) log-probabilities of ``command_ids`` after ``prompt_ids`` by one plain causal forward (the reference)."""
    lm = base_model(model)
    device = next(lm.parameters()).device
    ids = torch.tensor([[int(t) for t in prompt_ids] + [int(t) for t in command_ids]], device=device)  # (1, P + n)
    logits = lm(input_ids=ids).logits[0, len(prompt_ids) - 1:-1]  # (n, V) predicting each command token
    return torch.log_softmax(logits.float(), -1).gather(-1, ids[0, len(prompt_ids):, None]).squeeze(-1)
