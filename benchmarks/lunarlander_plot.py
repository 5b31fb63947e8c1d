"""The LunarLander benchmarks' one plot: held-out return per in-context episode, mean of seeds."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_returns(per_seed: dict[int, dict[str, np.ndarray]], seeds: list[int], path: Path, title: str) -> Path:
    """Mean over ``seeds`` of each row's LunarLander return per held-out episode (the seeds' range shaded; random and
    the source dashed; the solved return dotted), saved at ``path``."""
    from ad.plots import pyplot, save_figure

    plt = pyplot()
    names = [n for n in per_seed[seeds[0]] if all(n in per_seed[s] for s in seeds)]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name in names:
        stacked = np.stack([per_seed[s][name] for s in seeds])  # (seeds, episodes)
        mean = stacked.mean(0)
        x = np.arange(1, len(mean) + 1)
        ax.plot(x, mean, marker="o", ms=3, label=name, ls="--" if name in ("random", "source (its first episodes)")
                else "-")
        if len(seeds) > 1:
            ax.fill_between(x, stacked.min(0), stacked.max(0), alpha=0.12)
    ax.axhline(200, color="grey", lw=0.8, ls=":")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(fig, path, ax, xlabel="episode in context (held-out tasks)", ylabel="return (200: solved)")
