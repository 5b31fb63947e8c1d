"""Per-episode returns and per-task summaries of a learning-history dataset."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ad.history.reader import HistoryReader

SUMMARY_COLUMNS = ["stream", "episode", "reward", "terminated", "truncated"]


def episode_returns(columns: dict[str, np.ndarray], complete_only: bool = True) -> np.ndarray:
    """(num_episodes,) float64 sum of rewards of each episode of one stream's ``columns`` (at least "episode" and
    "reward"), in order; ``complete_only`` drops a trailing episode that did not end (per "terminated" / "truncated",
    where the columns have them)."""
    episode = columns["episode"]
    reward = columns["reward"].astype(np.float64)
    if episode.size == 0:
        return np.zeros(0)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(episode)) + 1])
    returns = np.add.reduceat(reward, starts)
    if complete_only and "terminated" in columns and "truncated" in columns:
        if not (columns["terminated"][-1] or columns["truncated"][-1]):
            returns = returns[:-1]
    return returns


def summarize(reader: "HistoryReader", fraction: float = 0.1) -> list[dict[str, Any]]:
    """One row per task: runs, streams, episodes, transitions, bytes/transition, early vs late mean return.

    "first"/"last" are the mean episode return over the first / last ``fraction`` of each stream's
    episodes, averaged over the task's streams.
    """
    rows = []
    by_task: dict[str, list[dict[str, Any]]] = {}
    for unit in reader.units():
        by_task.setdefault(unit["task"], []).append(unit)
    reader.require_units(reader.units())
    for task, units in sorted(by_task.items()):
        streams = episodes = transitions = size = 0
        first, last = [], []
        for unit in units:
            transitions += int(unit["rows"])
            size += int(unit.get("bytes", 0))
            for stream in reader.iter_unit_streams(unit, SUMMARY_COLUMNS):
                streams += 1
                returns = episode_returns(stream.columns)
                episodes += len(returns)
                if len(returns):
                    k = max(1, int(round(len(returns) * fraction)))
                    first.append(returns[:k].mean())
                    last.append(returns[-k:].mean())
        rows.append({"task": task, "runs": len(units), "streams": streams, "episodes": episodes,
                     "transitions": transitions, "bytes_per_transition": size / max(transitions, 1),
                     "return_first": float(np.mean(first)) if first else float("nan"),
                     "return_last": float(np.mean(last)) if last else float("nan")})
    return rows


def learning_curves(reader: "HistoryReader") -> dict[str, np.ndarray]:
    """Mean episode return per episode index (averaged over a task's streams) for each task."""
    curves: dict[str, np.ndarray] = {}
    for task in reader.tasks():
        per_stream = [episode_returns(s.columns) for s in reader.streams(tasks=[task], columns=SUMMARY_COLUMNS)]
        per_stream = [r for r in per_stream if len(r)]
        if not per_stream:
            continue
        n = min(len(r) for r in per_stream)
        curves[task] = np.mean([r[:n] for r in per_stream], axis=0)
    return curves
