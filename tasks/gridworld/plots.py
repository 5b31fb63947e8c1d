"""Success rate and off-map rate per policy version (update), from the logged full episodes."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ad.history import HistoryReader
from ad.plots import pyplot, save_figure

#: Phases whose rows are whole episodes played by the current actor (sampled).
EPISODE_PHASES = ("critic", "simpo-rollout")


def rates_per_update(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(updates (U,), success rate (U,), off-map rate (U,)) over the episodes of :data:`EPISODE_PHASES`."""
    table = HistoryReader(str(path)).table(columns=["task", "stream", "episode", "update", "phase", "success",
                                                    "off_map"]).to_pandas()
    table = table[table["phase"].isin(EPISODE_PHASES)]
    if table.empty:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    episodes = table.groupby(["task", "stream", "episode"]).agg(update=("update", "first"), success=("success", "any"),
                                                                off_map=("off_map", "any"))
    per = episodes.groupby("update").mean()
    return per.index.to_numpy(), per["success"].to_numpy(float), per["off_map"].to_numpy(float)


def plot_rates(path: str | Path, out: str | Path) -> Path:
    """Save the success / off-map rate curves (PNG)."""
    plt = pyplot()
    updates, success, off = rates_per_update(path)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(updates, success, marker="o", label="success rate")
    ax.plot(updates, off, marker="x", label="off-map rate")
    ax.set_xlabel("policy version (0 = base actor, k = after k SimPO iterations)")
    ax.set_ylabel("fraction of episodes (train configurations, sampled)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, out, dpi=110)
