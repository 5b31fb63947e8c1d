"""Acting with a causal LM in context, in B environments that advance in lockstep.

Each env's context is the Language-format text of its recent transitions followed by the prompt of the new
state (``... s40 a2 r0\\ns41 a``). Two ways to act on it:

* :class:`LMPolicy` *scores the valid actions*: the log-likelihood of every valid action's tokens after the
  context, for all B envs in one batched forward pass over one KV cache (left-padded; a step feeds only the new
  tokens, then the actions as one prefix tree, :mod:`ad.lm.scoring`), and picks the best (greedy) or samples from
  the scores renormalised over the valid actions (divided by ``temperature`` first). It cannot emit an invalid action.
* :class:`GeneratePolicy` generates text one env at a time and parses it through the template. Invalid outputs
  are counted in ``invalid``: ``on_invalid="error"`` raises, ``"random"`` takes a random valid action.

Window policy (:class:`ContextBook`, the same truncation rule as training): a context holds at most ``context``
transitions and ``max_tokens`` tokens (capped by the model's position limit) counting the new prompt and the
longest action. When a new state does not fit, every env's context drops its oldest transitions down to half of
both limits and the cache is rebuilt; dropping because of the *token* budget warns once.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from ad.errors import UserError
from ad.formats.language import Template, get_template
from ad.lm.scoring import CachedContexts, left_pad
from ad.lm.pretrained import position_limit
from models.lm.context import (TransitionTokens, TruncationWarner, encode_action, encode_prompt, encode_transition,
                               keep_newest)
from models.sampling import check_temperature, choose


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


class _LMActor:
    """What both policies share: model, tokenizer, template, valid actions, window limits."""

    def __init__(self, model: Any, tokenizer: Any, template: str | Template = "compact",
                 actions: Sequence[Any] = range(5), greedy: bool = False, generator: torch.Generator | None = None,
                 context: int = 40, max_tokens: int = 512, temperature: float = 1.0):
        self.model = model
        self.tokenizer = tokenizer
        self.template = get_template(template) if isinstance(template, str) else template
        self.actions = None if actions is None else list(actions)  # None: open text, anything that parses
        if self.actions == []:
            raise UserError("an LM policy needs at least one valid action")
        self.greedy = greedy
        self.generator = generator
        self.temperature = check_temperature(temperature)  # sampling: scores / T (T < 1: toward the greedy action)
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
    first)``; ``policy.scores(...)`` returns the (B, A) action log-likelihoods (``valid``: optional (B, A) bool mask).
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.actions is None:
            raise UserError("LMPolicy scores a set of valid actions; for open-text actions use GeneratePolicy")

    def reset(self, num_envs: int) -> None:
        super().reset(num_envs)
        self.contexts: CachedContexts | None = None  # the B contexts' tokens in one KV cache

    @torch.no_grad()
    def scores(self, obs, prev_action, prev_reward, timestep, first, valid=None) -> torch.Tensor:
        """Log-likelihood (B, A) of each valid action's tokens after each env's context (-inf if not valid)."""
        from ad.lm.kv_cache import growing_cache

        if self.num_envs is None:
            raise RuntimeError("call reset(num_envs) before acting")
        if self.book.push(obs, prev_action, prev_reward, timestep, first) or self.contexts is None:
            self.contexts = CachedContexts(self.model, self.pad_id, self.num_envs, growing_cache())
            hidden = self._forward(*left_pad([self.book.context_ids(b) for b in range(self.num_envs)], self.pad_id))
        else:
            hidden = self._forward(*left_pad([self.book.new_ids(b) for b in range(self.num_envs)], self.pad_id))
        scores = self.contexts.score_table(self.contexts.next_logp(hidden), [self.candidates] * self.num_envs)
        if valid is not None:
            valid = torch.as_tensor(valid, dtype=torch.bool, device=scores.device)
            if not bool(valid.any(-1).all()):
                raise ValueError("every env needs at least one valid action")
            scores = scores.masked_fill(~valid, float("-inf"))
        return scores

    def _forward(self, ids: torch.Tensor, chunk_mask: torch.Tensor) -> torch.Tensor:
        """Feed a (B, D) left-padded chunk after the cached tokens; returns the newest hidden states (B, H)."""
        return self.contexts.feed(ids, chunk_mask)

    def act(self, obs, prev_action, prev_reward, timestep, first, valid=None) -> torch.Tensor:
        """Actions (B,) for the new states: the best-scored valid action if greedy, else sampled."""
        scores = self.scores(obs, prev_action, prev_reward, timestep, first, valid)
        return self._to_actions(choose(scores.double(), self.greedy, self.generator, self.temperature))


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
                                  do_sample=not self.greedy, pad_token_id=self.pad_id, top_k=None, top_p=None,
                                  **({} if self.greedy else {"temperature": self.temperature}))
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
