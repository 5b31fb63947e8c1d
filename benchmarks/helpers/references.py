"""Slow, obviously-correct references the fast policies are tested and benchmarked against.

:class:`ADPolicyReference` is :class:`models.rl.policy.ADPolicy` without its KV cache: a full forward over the
whole window at every step (tests/test_models_rl_policy.py, ``benchmarks/eval_in_context.py``).

:class:`FullRecomputePolicy` is the slow way for an LM to act: one env at a time, a full forward pass over its
whole context at every step (no cache, no padding, no batching). It keeps its contexts with the same :class:`models.lm.policy.ContextBook` (the same
window rule) as :class:`models.lm.policy.LMPolicy`, so both see the same tokens: with greedy actions they must take
the same actions (tests/test_lm_acting.py), and ``benchmarks/lm_acting.py`` measures how much faster the batched,
cached policy is.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ad.formats.rl import RL_COLUMNS
from ad.lm.scoring import full_recompute
from models.lm.policy import _LMActor
from models.rl.policy import ADPolicy


def reference_windows(streams: Sequence[Any], window: int, stride: int = 1) -> list[dict[str, np.ndarray]]:
    """Slow, obviously-correct RL-format window extraction (one Python loop per window)."""
    out = []
    for stream in streams:
        n = len(stream.columns["episode"])
        for start in range(0, n - window + 1, stride):
            out.append({key: np.asarray(stream.columns[col][start:start + window])
                        for key, col in RL_COLUMNS.items()})
    return out


def sequence_logprob(model: Any, prefix: Sequence[int], continuation: Sequence[int]) -> float:
    """log p(continuation | prefix) by a full forward without cache (the reference for ``LMPolicy``)."""
    with torch.no_grad():
        return float(full_recompute(model, prefix, continuation).sum())


@torch.no_grad()
def actor_sequence_logprob(actor: Any, prompt: str, moves: Sequence[int]) -> float:
    """A grid-world ``LMActor``'s constrained log-probability of one move list after one prompt, by a full forward
    without cache (the reference its batched ``act`` is compared with; temperature 1 assumed by the caller)."""
    index = actor.trie.candidates.index(tuple(moves))
    cont = actor.trie.token_ids[index]
    prefix = actor.tokenizer(prompt)["input_ids"]
    ids = torch.as_tensor(prefix + cont, dtype=torch.long)[None]  # (1, L)
    logits = actor.model(input_ids=ids.to(actor.device)).logits[0].float().cpu() / actor.temperature  # (L, V)
    total, node = 0.0, 0
    for j, tok in enumerate(cont):
        allowed = actor.trie.allowed[node]
        scores = torch.log_softmax(logits[len(prefix) - 1 + j, allowed], -1)
        total += float(scores[int((allowed == tok).nonzero())])
        node = actor.trie.children[node][tok]
    return total


class ADPolicyReference(ADPolicy):
    """The slow reference: same window policy, but a full forward over the whole window every step."""

    @torch.no_grad()
    def logits(self, obs, prev_action, prev_reward, timestep, first) -> torch.Tensor:
        self._check(timestep)
        model, window = self.model, self.window
        window.push(obs, prev_action, prev_reward, timestep, first)
        x = model.tokens(*window.view())[:, : model.num_tokens(window.n)]  # (B, L, C)
        return model.action_head(model.transformer(x)[:, -1])


class FullRecomputePolicy(_LMActor):
    """Per env, per step: log p(candidate | full context) by plain forwards (one when every candidate is one
    token, else one per candidate), then the best (greedy) or a sampled candidate."""

    def scores(self, obs, prev_action, prev_reward, timestep, first) -> torch.Tensor:
        """Log-likelihood (B, A) of every valid action after each env's context, env by env."""
        if self.num_envs is None:
            raise RuntimeError("call reset(num_envs) before acting")
        self.book.push(obs, prev_action, prev_reward, timestep, first)
        single = all(len(c) == 1 for c in self.candidates)
        rows = []
        with torch.no_grad():
            for b in range(self.num_envs):
                context = torch.from_numpy(self.book.context_ids(b))
                if single:  # one forward: every candidate is one token after the context
                    logits = self.model(input_ids=context[None].to(self.device)).logits[0, -1]  # (V,)
                    rows.append(torch.log_softmax(logits.float(), -1).cpu()[[int(c[0]) for c in self.candidates]])
                else:
                    rows.append(torch.stack([self._candidate_logp(context, torch.from_numpy(c))
                                             for c in self.candidates]))
        return torch.stack(rows)  # (B, A)

    def _candidate_logp(self, context: torch.Tensor, candidate: torch.Tensor) -> torch.Tensor:
        ids = torch.cat([context, candidate])[None].to(self.device)  # (1, L + M)
        logp = torch.log_softmax(self.model(input_ids=ids).logits[0].float(), -1)  # (L + M, V)
        n = len(context)
        positions = torch.arange(n - 1, n - 1 + len(candidate))  # where each candidate token is predicted
        return logp[positions, candidate.to(logp.device)].sum().cpu()

    def act(self, obs, prev_action, prev_reward, timestep, first) -> Any:
        """Actions (B,) for the new states."""
        from models.sampling import choose

        scores = self.scores(obs, prev_action, prev_reward, timestep, first)
        return self._to_actions(choose(scores.double(), self.greedy, self.generator, self.temperature))
