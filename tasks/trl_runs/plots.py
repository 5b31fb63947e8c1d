"""The reward curve of a TRL-trained source: mean reward of the completions of each training iteration."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ad.history import HistoryReader
from ad.plots import pyplot, save_figure, smooth


def reward_per_update(path: Any) -> tuple[np.ndarray, np.ndarray]:
    """(updates ``(U,)``, mean reward ``(U,)``) over every logged completion of the dataset at ``path`` (a folder,
    URL or :class:`ad.history.Location`)."""
    table = HistoryReader(path).table(columns=["update", "reward"])
    update = table.column("update").to_numpy()
    reward = table.column("reward").to_numpy().astype(np.float64)
    updates, inverse = np.unique(update, return_inverse=True)
    sums = np.bincount(inverse, weights=reward)
    return updates, sums / np.bincount(inverse)


def plot_reward_curve(path: Any, out: str | Path, title: str = "reward per training iteration") -> Path:
    """Save the per-iteration mean reward (thin) and its smoothed curve (bold) as a PNG."""
    updates, means = reward_per_update(path)
    fig, ax = pyplot().subplots(figsize=(8, 4.5))
    ax.plot(updates, means, lw=0.7, alpha=0.4, label="mean reward of the iteration's completions")
    x, ys = smooth(means, points=max(1, len(means) // 5))
    if len(updates):
        ax.plot(np.interp(x, np.arange(len(updates)), updates), ys, lw=2.2, color="black", label="smoothed")
    ax.legend(loc="lower right")
    return save_figure(fig, out, ax, xlabel="training iteration (update)", ylabel="reward", title=title)
