"""The LLM actor: a causal LM whose output is constrained to move lists, for B prompts in one cached pass.

Every move list of 1..``max_moves`` moves (its text, ``" forward, left"``, then EOS) is a candidate in a token
trie. Decoding runs B prompts in lockstep with one KV cache (:class:`ad.lm.scoring.CachedContexts`), each
prompt's logits restricted to the children of its trie node, so every output is a valid move list; the logged
log-probabilities are those of that restricted, renormalised (and tempered) softmax. The prompts' shared opening
(strategy + grid info) runs once and its KV cache is repeated for every row.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np
import torch

from ad.lm.agents import ActorOutput
from ad.lm.scoring import CachedContexts
from ad.lm.scoring import shared_prefix_length  # noqa: F401  (the tests' name)
from tasks.gridworld.env import MOVES
from tasks.gridworld.prompts import moves_text


def completion_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a completion as the actor emits it: the text's tokens, then EOS."""
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def all_move_lists(max_moves: int) -> list[tuple[int, ...]]:
    """Every move list of length 1..max_moves (3 + 9 + ... candidates)."""
    return [seq for n in range(1, max_moves + 1) for seq in itertools.product(range(len(MOVES)), repeat=n)]


class MoveTrie:
    """Token trie of the candidates: ``children[node]`` maps token id -> child node; ``leaf[node]`` the candidate
    index that ends there (after its EOS) or -1."""

    def __init__(self, tokenizer: Any, max_moves: int):
        if tokenizer.eos_token_id is None:
            raise ValueError("the actor's tokenizer needs an EOS token to end a move list")
        self.candidates = all_move_lists(max_moves)
        self.children: list[dict[int, int]] = [{}]
        self.leaf: list[int] = [-1]
        self.token_ids: list[list[int]] = []
        for index, moves in enumerate(self.candidates):
            ids = completion_ids(tokenizer, moves_text(moves))
            self.token_ids.append(ids)
            node = 0
            for tok in ids:
                if tok not in self.children[node]:
                    self.children[node][tok] = len(self.children)
                    self.children.append({})
                    self.leaf.append(-1)
                node = self.children[node][tok]
            if self.leaf[node] != -1 or self.children[node]:
                raise ValueError(f"move list {moves_text(moves)!r} tokenizes ambiguously with this tokenizer")
            self.leaf[node] = index
        self.allowed = [torch.as_tensor(sorted(c), dtype=torch.long) for c in self.children]  # per node

    @property
    def depth(self) -> int:
        return max(len(ids) for ids in self.token_ids)


class LMActor:
    """Implements :class:`ad.lm.agents.Actor`: ``act(prompts, greedy)`` -> valid move lists + per-token logprobs."""

    def __init__(self, model: Any, tokenizer: Any, max_moves: int = 4, temperature: float = 1.0,
                 generator: torch.Generator | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.trie = MoveTrie(tokenizer, max_moves)
        self.temperature = float(temperature)
        self.generator = generator
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def act(self, prompts: Sequence[str], greedy: bool = False) -> ActorOutput:
        """Valid move lists for B prompts, decoded in lockstep under the trie (see the module docstring)."""
        was_training = self.model.training
        self.model.eval()
        B = len(prompts)
        contexts = CachedContexts(self.model, self.pad_id, B)
        logits = contexts.logits(contexts.start([self.tokenizer(p)["input_ids"] for p in prompts])).cpu()  # (B, V)
        node = [0] * B
        logps: list[list[float]] = [[] for _ in range(B)]
        done = [False] * B
        while not all(done):
            step_tokens = torch.full((B, 1), self.pad_id, dtype=torch.long)  # (B, 1)
            for b in range(B):
                if done[b]:
                    continue
                allowed = self.trie.allowed[node[b]]  # (K,)
                scores = torch.log_softmax(logits[b, allowed] / self.temperature, -1)  # (K,)
                if greedy or len(allowed) == 1:
                    k = int(scores.argmax())
                else:
                    k = int(torch.multinomial(scores.exp(), 1, generator=self.generator))
                tok = int(allowed[k])
                logps[b].append(float(scores[k]))
                node[b] = self.trie.children[node[b]][tok]
                step_tokens[b, 0] = tok
                done[b] = self.trie.leaf[node[b]] >= 0
            if all(done):
                break
            logits = contexts.logits(contexts.feed(step_tokens, torch.ones_like(step_tokens))).cpu()  # (B, V)
        self.model.train(was_training)
        actions = [list(self.trie.candidates[self.trie.leaf[n]]) for n in node]
        return ActorOutput(texts=[moves_text(a) for a in actions], actions=actions,
                           logprobs=[np.asarray(lp, np.float32) for lp in logps])
