"""Token contexts of Language-format windows, and the one truncation rule shared by training and acting.

A transition's text is its template segments, tokenised segment by segment (as
:func:`ad.formats.language.tokenize_segments` does), so a window's tokens are its transitions' tokens end to end
and each transition splits into a *prompt* (the tokens before the action) and the rest. Windows over a token
budget lose their oldest *whole* transitions (:func:`keep_newest`), in training and in acting.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ad.formats.language import Segment, Template, tokenize_segments


@dataclass
class TransitionTokens:
    """Tokens of one transition: ``prompt`` (before the action), ``action``, ``after`` (reward, newline ...)."""

    prompt: np.ndarray  # (p,) int64
    action: np.ndarray  # (a,) int64
    after: np.ndarray  # (q,) int64

    def __len__(self) -> int:
        return len(self.prompt) + len(self.action) + len(self.after)

    @property
    def ids(self) -> np.ndarray:
        return np.concatenate([self.prompt, self.action, self.after])

    @property
    def action_mask(self) -> np.ndarray:
        return np.concatenate([np.zeros(len(self.prompt), bool), np.ones(len(self.action), bool),
                               np.zeros(len(self.after), bool)])


def split_segments(segments: Sequence[Segment]) -> tuple[list[Segment], list[Segment], list[Segment]]:
    """(before, action, after) segments of one transition (the action = the first run of action segments)."""
    first = next((i for i, (_, is_action) in enumerate(segments) if is_action), None)
    if first is None:
        raise ValueError("template row has no action segment")
    last = first
    while last + 1 < len(segments) and segments[last + 1][1]:
        last += 1
    return list(segments[:first]), list(segments[first:last + 1]), list(segments[last + 1:])


def encode_transition(template: Template, tokenizer: Any, row: dict[str, Any]) -> TransitionTokens:
    """Tokens of one row (state, action, reward, step ...) of a history."""
    before, action, after = split_segments(template.row_segments(row))
    return TransitionTokens(*(tokenize_segments(tokenizer, part).input_ids for part in (before, action, after)))


def encode_prompt(template: Template, tokenizer: Any, row: dict[str, Any]) -> np.ndarray:
    """Tokens before the action of a row whose action is not chosen yet (only state / step are read)."""
    before, _, _ = split_segments(template.row_segments({"action": 0, "reward": 0.0, **row}))
    return tokenize_segments(tokenizer, before).input_ids


def encode_action(template: Template, tokenizer: Any, action: Any) -> np.ndarray:
    """Tokens of an action as the template writes it (the candidate an LM policy scores)."""
    return tokenize_segments(tokenizer, [(template.action_text(action), True)]).input_ids


def keep_newest(lengths: Sequence[int], budget: int) -> int:
    """Index of the oldest item to keep so that the newest items' total length fits in ``budget``; ``len(lengths)``
    when not even the newest item fits (one window of :func:`keep_newest_batch`)."""
    if len(lengths) == 0:
        return 0
    return int(keep_newest_batch(np.asarray(lengths, dtype=np.int64)[None], budget)[0])


def keep_newest_batch(lengths: np.ndarray, budget: int) -> np.ndarray:
    """The truncation rule of every Language-format window, for (B, T) transition lengths at once: (B,) the index of
    each window's oldest transition to keep, the newest *whole* transitions fitting in ``budget`` (T when none fits)."""
    suffix = np.cumsum(lengths[:, ::-1], axis=1)[:, ::-1]  # (B, T) tokens from transition t to the end
    return (suffix > budget).sum(1)  # suffix sums fall with t: the count over budget is the first index kept


class TruncationWarner:
    """Warns once that contexts over the token budget lose their oldest transitions."""

    def __init__(self, budget: int, where: str):
        self.budget = budget
        self.where = where
        self.warned = False

    def __call__(self, dropped: int) -> None:
        if dropped and not self.warned:
            warnings.warn(f"{self.where}: contexts longer than the token budget ({self.budget} tokens) lose their "
                          f"oldest transitions (here {dropped}); raise max_tokens to keep more", stacklevel=3)
            self.warned = True


def encode_window(template: Template, tokenizer: Any, rows: dict[str, Sequence[Any]], max_tokens: int,
                  loss_on: str = "actions", warner: TruncationWarner | None = None) -> dict[str, np.ndarray]:
    """input_ids / labels (-100 where no loss) of a window, its oldest transitions dropped to fit ``max_tokens``
    (:func:`keep_newest`'s rule; transitions are encoded newest first and those that cannot fit are never encoded)."""
    n = len(rows["action"])
    kept, total, start = [], 0, 0
    for i in range(n - 1, -1, -1):
        transition = encode_transition(template, tokenizer, {k: v[i] for k, v in rows.items()})
        total += len(transition)
        if total > max_tokens and kept:  # always keep the newest transition (cut from its left if it alone is too long)
            start = i + 1
            break
        kept.append(transition)
        if total > max_tokens:
            start = i
            break
    kept.reverse()
    if warner is not None:
        warner(start)
    ids = np.concatenate([t.ids for t in kept])[-max_tokens:]  # (L,)
    mask = np.concatenate([t.action_mask for t in kept])[-max_tokens:]  # (L,)
    labels = ids.copy() if loss_on == "all" else np.where(mask, ids, -100)
    return {"input_ids": ids, "labels": labels}
