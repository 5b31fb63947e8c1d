"""History columns of TextWorld datasets and the rows of played episodes: one unit per phase part
(:mod:`tasks.textworld.generate`), its episodes one after another in a single stream (``episode`` = game index,
``step`` = move); state = the prompt, action = the command, reward = score change, logprob = the command's per-token
log-probabilities (empty for gold demonstrations), plus ``value`` (NaN where there is none), ``phase``, ``fold``,
``game_seed`` and ``score`` (the game's normalised score after the move).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ad.history import ColumnSpec, HistorySpec
from tasks.textworld.rollouts import Episode

SPEC = HistorySpec(state=ColumnSpec.text(), action=ColumnSpec.text(), logprob="per_token",
                   extra={"value": "float32", "phase": "string", "fold": "string", "game_seed": "int32",
                          "score": "float32"})


def episode_columns(episodes: Sequence[Episode], phase: str, update: int) -> dict[str, Any]:
    """Columns of a unit holding ``episodes`` in order (one stream)."""
    lengths = [len(ep) for ep in episodes]

    def moves(field: str, dtype: Any = None) -> Any:  # a field of every move, episode after episode
        values = [x for ep in episodes for x in getattr(ep, field)]
        return values if dtype is None else np.asarray(values, dtype)

    def per_episode(values: Sequence[Any], dtype: Any) -> np.ndarray:  # one value per episode, on each of its moves
        return np.repeat(np.asarray(values, dtype), lengths)

    return {"stream": np.zeros(sum(lengths), np.int32), "update": np.full(sum(lengths), update, np.int64),
            "episode": per_episode(range(len(episodes)), np.int32),
            "step": np.asarray([t for n in lengths for t in range(n)], np.int32),
            "reward": moves("rewards", np.float32), "terminated": moves("terminated", bool),
            "truncated": moves("truncated", bool), "value": moves("values", np.float32),
            "game_seed": per_episode([ep.seed for ep in episodes], np.int32),
            "score": np.asarray([s for ep in episodes for s in np.cumsum(ep.rewards)], np.float32),
            "state": moves("prompts"), "action": moves("actions"),
            "logprob": [np.asarray(lp, np.float32) for lp in moves("logprobs")],
            "phase": [phase] * sum(lengths), "fold": [ep.fold for ep in episodes for _ in range(len(ep))]}
