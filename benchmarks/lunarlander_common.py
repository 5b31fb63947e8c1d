"""What the LunarLander benchmarks share: the source's running returns and their milestones, and the plot of held-out
return per in-context episode."""
from __future__ import annotations

from pathlib import Path

import numpy as np

THRESHOLDS = (0.0, 100.0, 200.0)
WINDOW = 20  #: episodes in a stream's running return


def running_returns(data: str | Path, window: int = WINDOW) -> dict[str, np.ndarray]:
    """Per task of a LunarLander dataset: its running return per episode, the mean over its streams (which run in
    lockstep) of each stream's mean return over its last ``window`` episodes."""
    from ad.history import HistoryReader
    from ad.history.summary import SUMMARY_COLUMNS, episode_returns

    reader = HistoryReader(data)
    out: dict[str, np.ndarray] = {}
    for task in sorted(reader.metadata["tasks"]):
        curves = [episode_returns(s.columns) for s in reader.streams(tasks=[task], columns=SUMMARY_COLUMNS)]
        n = min((len(c) for c in curves), default=0)
        if n:
            counts = np.minimum(np.arange(1, n + 1), window)  # (n,) episodes in each running mean
            out[task] = np.stack([np.convolve(c[:n], np.ones(window), "full")[:n] / counts
                                  for c in curves]).mean(0)  # (n,)
    return out


def return_milestones(data: str | Path, thresholds: tuple[float, ...] = THRESHOLDS,
                      window: int = WINDOW) -> dict[str, dict[str, int | float | None]]:
    """Per task: the first episode (1-based) at which its running return (:func:`running_returns`) passes each
    threshold (None where it never does), its episodes per stream and its final running return."""
    out: dict[str, dict[str, int | float | None]] = {}
    for task, running in running_returns(data, window).items():
        out[task] = {f"{t:g}": (int(np.argmax(running >= t)) + 1 if (running >= t).any() else None)
                     for t in thresholds}
        out[task]["episodes"] = len(running)
        out[task]["final_running_return"] = float(running[-1])
    return out


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
