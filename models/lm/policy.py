"""Acting with a causal LM in context, in B environments that advance in lockstep.

Each env's context is the Language-format text of its recent transitions followed by the prompt of the new
state (``... s40 a2 r0\\ns41 a``). Two ways to act on it:

* :class:`LMPolicy` *scores the valid actions*: the log-likelihood of every valid action's tokens after the
  context, for all B envs in one batched forward pass, and picks the best (greedy) or samples from the scores
  renormalised over the valid actions. It cannot emit an invalid action. One KV cache holds all B contexts
  (left-padded, pads masked); a step feeds only the new tokens (last action + reward + new state prompt).
* :class:`GeneratePolicy` generates text one env at a time and parses it through the template (how seed 002
  and most LLM-agent libraries act). Unparseable or invalid outputs are counted in ``invalid`` and reported,
  never silently replaced: ``on_invalid="error"`` raises, ``"random"`` takes a random valid action and counts it.

Window policy (shared by both through :class:`ContextBook`, and the same truncation rule as training): a
context holds at most ``context`` transitions and ``max_tokens`` tokens (capped by the model's position limit)
counting the new prompt and the longest action. When a new state does not fit, every env's context drops its
oldest transitions down to half of both limits, and the cache is rebuilt from scratch. Dropping because of the
*token* budget warns once.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ad.errors import UserError
from ad.formats.language import Template, get_template
from ad.pretrained import position_limit
from models.lm.context import (TransitionTokens, TruncationWarner, encode_action, encode_prompt, encode_transition,
                               keep_newest)


def _items(x: Any) -> list[Any]:
    """Python values of every env's entry of a tensor / array / list (scalars or lists), in one conversion."""
    if hasattr(x, "detach"):
        return x.detach().cpu().tolist()
    return np.asarray(x).tolist() if not isinstance(x, list) else list(x)


class ContextBook:
    """Token contexts of B lockstep envs under the window policy (see the module docstring)."""

    def __init__(self, template: Template, tokenizer: Any, context: int, budget: int, reserve: int):
        self.template, self.tokenizer = template, tokenizer
        self.context, self.budget, self.reserve = context, budget, reserve
        self.warner = TruncationWarner(budget, "in-context acting")
        self.memo: dict[tuple, Any] = {}  # (kind, row values) -> tokens: small discrete envs repeat rows
        self.reset(0)

    def _cached(self, kind: str, row: dict[str, Any], encode: Any) -> Any:
        """``encode(template, tokenizer, row)``, memoised for rows of scalars (at most 2**16 of them)."""
        key = (kind, *sorted(row.items()))
        try:
            return self.memo[key]
        except KeyError:
            pass
        except TypeError:  # unhashable values (lists): no memo
            return encode(self.template, self.tokenizer, row)
        if len(self.memo) >= 1 << 16:
            self.memo.clear()
        value = self.memo[key] = encode(self.template, self.tokenizer, row)
        return value

    def reset(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.history: list[list[TransitionTokens]] = [[] for _ in range(num_envs)]
        self.tokens = [0] * num_envs  # tokens in each env's history
        self.rows: list[dict[str, Any]] = [{} for _ in range(num_envs)]  # the transition being chosen
        self.prompts: list[np.ndarray] = [np.zeros(0, np.int64)] * num_envs

    def push(self, obs, prev_action, prev_reward, timestep, first) -> bool:
        """Complete the last transitions and add the new states' prompts; True if contexts restart."""
        first = torch.as_tensor(first, dtype=torch.bool)
        if bool(first.any()):
            if not bool(first.all()):
                raise ValueError("`first` must be True for all envs at once (they advance in lockstep)")
            self.reset(self.num_envs)
        restart = bool(first.all()) or any(not row for row in self.rows)  # nothing to complete yet
        states, steps = _items(obs), _items(timestep)
        actions, rewards = (None, None) if restart else (_items(prev_action), _items(prev_reward))
        for b in range(self.num_envs):
            if not restart:  # complete the transition whose action was taken
                done = self._cached("transition", {**self.rows[b], "action": actions[b],
                                                   "reward": float(rewards[b])}, encode_transition)
                self.history[b].append(done)
                self.tokens[b] += len(done)
            self.rows[b] = {"state": states[b], "step": int(steps[b])}
            self.prompts[b] = self._cached("prompt", self.rows[b], encode_prompt)
        needs = [self.tokens[b] + len(self.prompts[b]) + self.reserve for b in range(self.num_envs)]
        over_tokens = any(n > self.budget for n in needs)
        if over_tokens or any(len(h) >= self.context for h in self.history):
            self._shrink(over_tokens)
            restart = True
        return restart

    def _shrink(self, over_tokens: bool) -> None:
        """Keep each env's newest transitions within half the transition and token limits."""
        dropped = 0
        for b, hist in enumerate(self.history):
            room = max(0, self.budget // 2 - len(self.prompts[b]) - self.reserve)
            start = max(len(hist) - self.context // 2, keep_newest([len(t) for t in hist], room))
            dropped = max(dropped, start)
            self.history[b] = hist[start:]
            self.tokens[b] = sum(len(t) for t in self.history[b])
        if over_tokens:
            self.warner(dropped)

    def context_ids(self, b: int) -> np.ndarray:
        """Full context tokens of env b: its kept transitions, then the new prompt."""
        return np.concatenate([t.ids for t in self.history[b]] + [self.prompts[b]])

    def new_ids(self, b: int) -> np.ndarray:
        """Tokens added since the last step: the last transition's action and what follows it, the new prompt."""
        last = self.history[b][-1]
        return np.concatenate([last.action, last.after, self.prompts[b]])


def _left_pad(seqs: Sequence[np.ndarray], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L) ids and mask of sequences aligned on their last token."""
    length = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), length), dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, length - len(s):] = torch.from_numpy(np.asarray(s, dtype=np.int64))
            mask[i, length - len(s):] = 1
    return ids, mask


def _choose(scores: torch.Tensor, greedy: bool, generator: torch.Generator | None) -> torch.Tensor:
    """Indices (B,) of the best (greedy) or sampled candidates; scores (B, A) are log-likelihoods."""
    if greedy:
        return scores.argmax(-1)
    return torch.multinomial(torch.softmax(scores.double(), -1), 1, generator=generator).squeeze(-1)


class _LMActor:
    """What both policies share: model, tokenizer, template, valid actions, window limits."""

    def __init__(self, model: Any, tokenizer: Any, template: str | Template = "compact",
                 actions: Sequence[Any] = range(5), greedy: bool = False, generator: torch.Generator | None = None,
                 context: int = 40, max_tokens: int = 512):
        self.model = model
        self.tokenizer = tokenizer
        self.template = get_template(template) if isinstance(template, str) else template
        self.actions = None if actions is None else list(actions)  # None: open text, anything that parses
        if self.actions == []:
            raise UserError("an LM policy needs at least one valid action")
        self.greedy = greedy
        self.generator = generator
        self.num_actions = None if self.actions is None else len(self.actions)
        self.candidates = [encode_action(self.template, tokenizer, a) for a in self.actions or []]
        if any(len(c) == 0 for c in self.candidates):
            raise UserError(f"template {self.template.name!r} writes some action as no tokens")
        limit = position_limit(model) or max_tokens
        self.budget = min(int(max_tokens), int(limit))
        self.book = ContextBook(self.template, tokenizer, int(context), self.budget,
                                max((len(c) for c in self.candidates), default=0))
        self.num_envs = None
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def reset(self, num_envs: int) -> None:
        """Start fresh for ``num_envs`` envs (empties the contexts)."""
        self.model.eval()
        self.book.reset(num_envs)
        self.num_envs = num_envs

    def _to_actions(self, index: torch.Tensor) -> torch.Tensor:
        values = [self.actions[i] for i in index.tolist()]
        return torch.as_tensor(values) if all(isinstance(v, (int, np.integer)) for v in values) else values


class LMPolicy(_LMActor):
    """Scores every valid action after each env's context with one KV cache for B envs; never invalid.

    ``policy.reset(num_envs)``, then each step ``actions = policy.act(obs, prev_action, prev_reward, timestep,
    first)``; ``policy.scores(...)`` returns the (B, A) action log-likelihoods instead (``valid``: optional
    (B, A) bool mask of the actions allowed in each env).
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.actions is None:
            raise UserError("LMPolicy scores a set of valid actions; for open-text actions use GeneratePolicy")

    def reset(self, num_envs: int) -> None:
        super().reset(num_envs)
        self.cache = None
        self.mask: torch.Tensor | None = None  # (B, L) 1 = real token in the cache
        self.next_pos: torch.Tensor | None = None  # (B,) position id of each env's next token

    @torch.no_grad()
    def scores(self, obs, prev_action, prev_reward, timestep, first, valid=None) -> torch.Tensor:
        """Log-likelihood (B, A) of each valid action's tokens after each env's context (-inf if not valid)."""
        from models.lm.kv_cache import growing_cache

        if self.num_envs is None:
            raise RuntimeError("call reset(num_envs) before acting")
        if self.book.push(obs, prev_action, prev_reward, timestep, first) or self.cache is None:
            ids, chunk_mask = _left_pad([self.book.context_ids(b) for b in range(self.num_envs)], self.pad_id)
            self.cache = growing_cache()
            self.mask = chunk_mask[:, :0]
            self.next_pos = torch.zeros(self.num_envs, dtype=torch.long)
        else:
            ids, chunk_mask = _left_pad([self.book.new_ids(b) for b in range(self.num_envs)], self.pad_id)
        logits = self._forward(ids, chunk_mask)[:, -1]  # (B, V) next-token logits after each context
        logp = torch.log_softmax(logits.float(), -1)  # (B, V)
        first_tokens = torch.as_tensor([int(c[0]) for c in self.candidates])  # (A,)
        scores = logp[:, first_tokens]  # (B, A)
        if max(len(c) for c in self.candidates) > 1:
            scores = scores + self._continuation_logp()
        if valid is not None:
            valid = torch.as_tensor(valid, dtype=torch.bool, device=scores.device)
            if not bool(valid.any(-1).all()):
                raise ValueError("every env needs at least one valid action")
            scores = scores.masked_fill(~valid, float("-inf"))
        return scores

    @property
    def last_logits_only(self) -> bool:
        """Whether the model's forward takes ``logits_to_keep`` (transformers >= 4.50 causal LMs)."""
        if not hasattr(self, "_last_only"):
            import inspect

            forward = getattr(getattr(self.model, "get_base_model", lambda: self.model)(), "forward")
            self._last_only = "logits_to_keep" in inspect.signature(forward).parameters
        return self._last_only

    def _forward(self, ids: torch.Tensor, chunk_mask: torch.Tensor) -> torch.Tensor:
        """Feed a (B, D) left-padded chunk after the cached tokens; returns logits (B, D or 1, V)."""
        device = self.device
        mask = torch.cat([self.mask, chunk_mask], 1)  # (B, L + D)
        positions = self.next_pos[:, None] + (chunk_mask.cumsum(1) - 1).clamp(min=0)  # (B, D) pads skipped
        inputs = dict(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                      cache=self.cache, use_cache=True)
        if self.last_logits_only:  # the LM head only where it is read: saves a (B, D, vocab) matmul
            # the last position as a 1-D index tensor, not the int 1: transformers then gathers a contiguous
            # (B, 1, C) copy, where the int gives a strided view that torch's CPU matmul runs ~250x slower in
            # bfloat16 (2 s vs 8 ms for SmolLM2's 49k-word head, 10 envs) and ~5x slower in float32
            out = self.model(**inputs, logits_to_keep=torch.tensor([ids.shape[1] - 1], device=device))
        else:
            out = self.model(**inputs)
        self.mask = mask
        self.next_pos = self.next_pos + chunk_mask.sum(1)
        return out.logits

    def _continuation_logp(self) -> torch.Tensor:
        """Log-likelihood (B, A) of every candidate's tokens after its first, all B*A in one pass.

        The cache is repeated A times in place for the pass, then cropped and selected back to B rows.
        """
        B, A, device = self.num_envs, self.num_actions, self.device
        M = max(len(c) for c in self.candidates)
        cand, cand_mask = torch.full((A, M), self.pad_id, dtype=torch.long), torch.zeros((A, M), dtype=torch.long)
        for a, c in enumerate(self.candidates):
            cand[a, :len(c)], cand_mask[a, :len(c)] = torch.from_numpy(c), 1
        self.cache.batch_repeat_interleave(A)  # (B*A, ...) rows: env-major
        ids = cand.repeat(B, 1)  # (B*A, M)
        mask = torch.cat([self.mask.repeat_interleave(A, 0), cand_mask.repeat(B, 1)], 1)  # (B*A, L + M)
        positions = self.next_pos.repeat_interleave(A)[:, None] + torch.arange(M)  # (B*A, M)
        logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device),
                            position_ids=positions.to(device), cache=self.cache,
                            use_cache=True).logits  # (B*A, M, V)
        self.cache.crop(-M)  # drop the candidates' tokens (a negative count: every transformers version)
        self.cache.batch_select_indices(torch.arange(0, B * A, A, device=device))
        logp = torch.log_softmax(logits[:, :-1].float(), -1)  # (B*A, M-1, V): token j+1 given tokens <= j
        target = ids[:, 1:].to(device)  # (B*A, M-1)
        picked = logp.gather(-1, target[..., None]).squeeze(-1) * cand_mask.repeat(B, 1)[:, 1:].to(device)
        return picked.sum(-1).view(B, A).cpu()  # (B, A)

    def act(self, obs, prev_action, prev_reward, timestep, first, valid=None) -> torch.Tensor:
        """Actions (B,) for the new states: the best-scored valid action if greedy, else sampled."""
        scores = self.scores(obs, prev_action, prev_reward, timestep, first, valid)
        return self._to_actions(_choose(scores, self.greedy, self.generator))


class GeneratePolicy(_LMActor):
    """Free generation + parsing, one env at a time; counts invalid outputs (see the module docstring)."""

    def __init__(self, *args: Any, max_new_tokens: int = 4, on_invalid: str = "random", **kwargs: Any):
        super().__init__(*args, **kwargs)
        if on_invalid not in ("random", "error"):
            raise UserError(f"on_invalid must be 'random' or 'error', got {on_invalid!r}")
        if on_invalid == "random" and self.actions is None:
            raise UserError("open-text actions (actions=None) have no valid set to draw a replacement from; "
                            "use on_invalid='error'")
        self.max_new_tokens = max_new_tokens
        self.on_invalid = on_invalid
        self.invalid = 0  #: outputs that did not parse to a valid action
        self.decisions = 0
        self.invalid_examples: list[str] = []
        self.book.reserve = max_new_tokens

    @torch.no_grad()
    def generate(self, b: int) -> str:
        """Generated text after env b's context."""
        ids = torch.from_numpy(self.book.context_ids(b))[None].to(self.device)  # (1, L)
        out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.max_new_tokens,
                                  do_sample=not self.greedy, pad_token_id=self.pad_id, top_k=None, top_p=None)
        return self.tokenizer.decode(out[0, ids.size(1):], skip_special_tokens=True)

    def parse(self, text: str) -> Any | None:
        """The valid action that ``text`` starts with, or None."""
        try:
            action = self.template.parse_action(text)
        except ValueError:
            return None
        return action if self.actions is None or action in self.actions else None

    def act(self, obs, prev_action, prev_reward, timestep, first) -> torch.Tensor | list:
        """Actions (B,) parsed from text generated after each env's context, one env at a time."""
        if self.num_envs is None:
            raise RuntimeError("call reset(num_envs) before acting")
        self.book.push(obs, prev_action, prev_reward, timestep, first)
        chosen = []
        for b in range(self.num_envs):
            text = self.generate(b)
            action = self.parse(text)
            self.decisions += 1
            if action is None:
                self.invalid += 1
                if len(self.invalid_examples) < 10:
                    self.invalid_examples.append(text)
                if self.on_invalid == "error":
                    raise UserError(f"the model generated {text!r}, which is not a valid action "
                                    f"({self.actions})")
                action = self.actions[int(torch.randint(len(self.actions), (1,), generator=self.generator))]
            chosen.append(action)
        if all(isinstance(a, (int, np.integer)) for a in chosen):
            return torch.as_tensor(chosen)
        return chosen

    @property
    def invalid_rate(self) -> float:
        return self.invalid / max(1, self.decisions)


@torch.no_grad()
def sequence_logprob(model: Any, prefix: Sequence[int], continuation: Sequence[int]) -> float:
    """log p(continuation | prefix) by a full forward without cache (the reference for :class:`LMPolicy`)."""
    ids = torch.as_tensor(list(prefix) + list(continuation), dtype=torch.long)[None]  # (1, L)
    logp = torch.log_softmax(model(input_ids=ids.to(next(model.parameters()).device)).logits[0].float(), -1)
    n = len(prefix)
    return float(sum(logp[n - 1 + j, int(tok)] for j, tok in enumerate(continuation)))
