"""How fast the source algorithm learns, read from its histories, and the subsampling rate that follows from it.

AD imitates the *subsampled* history: trained on every k-th episode, it should improve about k times faster per
episode than its source. What it can learn depends on how many of those subsampled episodes show the source
*learning*: with k too large the whole improvement fits in one or two episodes and nearly every training window is
already converged. :func:`subsample_for` picks k so that the source's improvement spans a fixed number of
subsampled episodes, whatever the room size (a larger room takes the A2C more episodes, so k grows with it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ad.errors import UserError
from ad.history.summary import SUMMARY_COLUMNS, episode_returns

if TYPE_CHECKING:
    from ad.history.reader import HistoryReader


def episodes_to_learn(reader: "HistoryReader", tasks: Sequence[str], fraction: float = 0.9, smooth: int = 10,
                      max_tasks: int = 20) -> float:
    """Median over ``tasks``' streams (the first ``max_tasks`` tasks) of the first episode whose ``smooth``-episode
    mean return reaches ``fraction`` of the task's optimal return (a stream that never does counts its length).

    Needs ``metadata["tasks"][task]["optimal_return"]`` (DarkRoom, Key-to-Door). Pass training tasks only: the
    held-out ones must not shape the training.
    """
    info = reader.metadata.get("tasks") or {}
    firsts: list[int] = []
    for task in list(tasks)[:max_tasks]:
        optimum = (info.get(task) or {}).get("optimal_return")
        if optimum is None:
            raise UserError(f"dataset {reader.location.base} records no optimal return for task {task}; pass the "
                            "subsampling rate explicitly (--subsample K)")
        for stream in reader.streams(tasks=[task], columns=SUMMARY_COLUMNS):
            returns = episode_returns(stream.columns)
            if len(returns) < smooth:
                continue
            mean = np.convolve(returns, np.ones(smooth) / smooth, mode="valid")  # (episodes - smooth + 1,)
            hit = np.flatnonzero(mean >= fraction * optimum - 1e-9)  # (a mean of exact returns may round below)
            firsts.append(int(hit[0]) + smooth if hit.size else len(returns))
    if not firsts:
        raise UserError(f"dataset {reader.location.base} has no stream of {smooth}+ episodes among tasks "
                        f"{', '.join(list(tasks)[:3])} ...; pass the subsampling rate explicitly (--subsample K)")
    return float(np.median(firsts))


def subsample_for(reader: "HistoryReader", tasks: Sequence[str], learning_episodes: int) -> tuple[int, float]:
    """(k, the source's median episodes to learn): k such that the source's learning spans about
    ``learning_episodes`` episodes of the subsampled history (at least 1)."""
    episodes = episodes_to_learn(reader, tasks)
    return max(1, int(round(episodes / learning_episodes))), episodes
