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
    cols: dict[str, list] = {k: [] for k in ("stream", "update", "episode", "step", "state", "action", "reward",
                                             "terminated", "truncated", "logprob", "value", "phase", "fold",
                                             "game_seed", "score")}
    for i, ep in enumerate(episodes):
        n = len(ep)
        score = np.cumsum(ep.rewards) if n else np.zeros(0)
        cols["stream"] += [0] * n
        cols["update"] += [update] * n
        cols["episode"] += [i] * n
        cols["step"] += list(range(n))
        cols["state"] += ep.prompts
        cols["action"] += ep.actions
        cols["reward"] += ep.rewards
        cols["terminated"] += ep.terminated
        cols["truncated"] += ep.truncated
        cols["logprob"] += [np.asarray(lp, np.float32) for lp in ep.logprobs]
        cols["value"] += ep.values
        cols["phase"] += [phase] * n
        cols["fold"] += [ep.fold] * n
        cols["game_seed"] += [ep.seed] * n
        cols["score"] += score.tolist()
    out: dict[str, Any] = {k: np.asarray(v) for k, v in cols.items() if k not in ("state", "action", "logprob",
                                                                                 "phase", "fold")}
    for k, dtype in (("stream", np.int32), ("update", np.int64), ("episode", np.int32), ("step", np.int32),
                     ("reward", np.float32), ("value", np.float32), ("game_seed", np.int32), ("score", np.float32)):
        out[k] = out[k].astype(dtype)
    out["terminated"], out["truncated"] = out["terminated"].astype(bool), out["truncated"].astype(bool)
    out.update(state=cols["state"], action=cols["action"], logprob=cols["logprob"], phase=cols["phase"],
               fold=cols["fold"])
    return out
