"""The whole game so far as the prompt, its keys and values kept across moves (``ad generate textworld
--transcript``).

Move t's prompt (:func:`tasks.textworld.prompts.build_prompt` with every earlier move shown) *extends* move t-1's
by `` <command>`` and the next step's text, so acting feeds only the new tokens to each game's cached keys and
values (:class:`TranscriptScorer`), SFT reads a whole game in one row (:func:`encode_transcript`), and the policy
sees every room it entered. Tokens are encoded piece by piece, the same way in both (the first prompt, then per move
the command as the scorer encodes it and the text up to the next ``Action:``), so SFT maximises exactly the scores
the policy acts on.
"""
from __future__ import annotations

from typing import Any, Hashable, Sequence

from ad.errors import UserError
from ad.lm.scoring import CachedContexts
from tasks.textworld.scoring import Scored, encode_commands

STEP_MARK = "\n# STEP "


def split_extension(previous: str, prompt: str) -> tuple[str, str]:
    """(command, following text) that ``prompt`` appends to ``previous``: ``prompt == previous + " " + command +
    following``, the following text starting at the next step line. ValueError if ``prompt`` does not extend it."""
    if not prompt.startswith(previous):
        raise ValueError("a transcript prompt must extend the same game's previous prompt (build_prompt with every "
                         "earlier move shown)")
    added = prompt[len(previous):]
    at = added.find(STEP_MARK)
    if not added.startswith(" ") or at < 2:
        raise ValueError(f"a transcript prompt must add ' <command>' and a step line, got {added[:80]!r}")
    return added[1:at], added[at:]


def encode_transcript(tokenizer: Any, prompts: Sequence[str], actions: Sequence[str]
                      ) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids of one game's transcript through its last command, and each command's (start, end) token span.
    ``prompts[k]`` is the prompt of move k, ``actions[k]`` the command taken there."""
    if len(prompts) != len(actions) or not prompts:
        raise ValueError(f"need one command per prompt, got {len(prompts)} prompts and {len(actions)} commands")
    ids = list(tokenizer(prompts[0], add_special_tokens=False)["input_ids"])
    spans = []
    for k, command in enumerate(actions):
        if k:
            taken, following = split_extension(prompts[k - 1], prompts[k])
            if taken != actions[k - 1]:
                raise ValueError(f"prompt {k} continues with {taken!r}, but command {k - 1} is {actions[k - 1]!r}")
            ids += tokenizer(following, add_special_tokens=False)["input_ids"]
        (cmd,) = encode_commands(tokenizer, [command])
        spans.append((len(ids), len(ids) + len(cmd)))
        ids += cmd
    return ids, spans


class TranscriptScorer:
    """Scores every valid command of many games, each game's transcript kept in one batched KV cache between moves.
    The first call (or one with only unseen keys) starts a fresh cache; later calls may drop games but not add any.
    Each call runs the games' new tokens over the cache, then the candidates as in
    :func:`tasks.textworld.scoring.score_candidates`, whose keys and values are cropped off again."""

    def __init__(self, model: Any, tokenizer: Any, max_tokens: int) -> None:
        self.model, self.tokenizer, self.max_tokens = model, tokenizer, int(max_tokens)
        self.pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        self.reset()

    def reset(self) -> None:
        """Forget every game."""
        self.keys: list[Hashable] = []
        self.contexts: CachedContexts | None = None  # the games' transcripts in one KV cache
        self.texts: list[str] = []
        self.ids: list[list[int]] = []

    def _keep(self, keys: Sequence[Hashable]) -> None:
        """Restrict the cache to ``keys`` (in that order), starting afresh when none of them is cached."""
        if not self.keys or not set(keys) & set(self.keys):
            self.reset()
            self.keys = list(keys)
            self.contexts = CachedContexts(self.model, self.pad, len(keys))
            self.texts, self.ids = [""] * len(keys), [[] for _ in keys]
            return
        if set(keys) - set(self.keys):
            raise ValueError("a transcript scorer cannot add games to a running batch: start all games together")
        if list(keys) != self.keys:
            rows = [self.keys.index(k) for k in keys]
            self.contexts.select(rows)
            self.texts, self.ids = [self.texts[r] for r in rows], [self.ids[r] for r in rows]
            self.keys = list(keys)

    def _extension(self, text: str, prompt: str) -> list[int]:
        """The tokens ``prompt`` adds to a transcript cached as ``text`` (the whole prompt when ``text`` is empty)."""
        if not text:
            return list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        command, following = split_extension(text, prompt)
        return encode_commands(self.tokenizer, [command])[0] + \
            list(self.tokenizer(following, add_special_tokens=False)["input_ids"])

    def fits(self, keys: Sequence[Hashable], prompts: Sequence[str], candidates: Sequence[Sequence[str]]
             ) -> list[bool]:
        """Whether each game's transcript can take ``prompt`` and its longest candidate command within
        ``max_tokens`` (games not yet cached count from nothing). Changes nothing."""
        rows = {k: r for r, k in enumerate(self.keys)} if set(keys) & set(self.keys) else {}  # else: a new batch
        out = []
        for key, prompt, commands in zip(keys, prompts, candidates):
            r = rows.get(key)
            cached, text = (int(self.contexts.count[r]), self.texts[r]) if r is not None else (0, "")
            longest = max((len(c) for c in encode_commands(self.tokenizer, list(commands))), default=0)
            out.append(cached + len(self._extension(text, prompt)) + longest <= self.max_tokens)
        return out

    def score(self, keys: Sequence[Hashable], prompts: Sequence[str], candidates: Sequence[Sequence[str]]) -> Scored:
        """Score every candidate of every game; ``Scored.prompt_ids`` are the whole transcripts' tokens."""
        if len(keys) != len(prompts) or len(set(keys)) != len(keys):
            raise ValueError("give one distinct key per prompt")
        self._keep(keys)
        new = [self._extension(self.texts[b], p) for b, p in enumerate(prompts)]
        count = self.contexts.count
        for b, tokens in enumerate(new):
            if int(count[b]) + len(tokens) > self.max_tokens:
                raise UserError(f"the transcript of game {keys[b]} reached {int(count[b]) + len(tokens)} "
                                f"tokens, over the limit of {self.max_tokens}: raise --max-prompt-tokens (within "
                                "the model's context) or lower --step-limit")
        hidden = self.contexts.extend(new)  # (B, H) each game's newest token
        for b, (prompt, tokens) in enumerate(zip(prompts, new)):
            self.texts[b], self.ids[b] = prompt, self.ids[b] + tokens
        command_ids = [encode_commands(self.tokenizer, c) for c in candidates]
        scores, token_logprobs = self.contexts.score(self.contexts.next_logp(hidden), command_ids)
        return Scored(scores, token_logprobs, hidden, [list(t) for t in self.ids], command_ids)
