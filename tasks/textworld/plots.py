"""The figure of a TextWorld run: success and normalised score per phase, held-out beside train-fold games."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def plot_phases(results: dict[str, dict[str, Any]], path: Path, seeds: Any = None,
                phases: Sequence[str] = ("base", "sft", "ppo")) -> None:
    """Bars of success and mean normalised score (test and train folds) for base / SFT / PPO, and the PPO iterations'
    sampled train success, from ``results`` (unit name -> summary; a value may be a list over seeds, shown as dots)."""
    import numpy as np

    from ad.plots import pyplot, save_figure

    def values(name: str, key: str) -> np.ndarray:
        v = results.get(name, {}).get(key, np.nan)
        return np.atleast_1d(np.asarray(v, dtype=float))

    fig, axes = pyplot().subplots(1, 3, figsize=(13, 3.8), dpi=110)
    x = np.arange(len(phases))
    for ax, key in zip(axes[:2], ("success", "score")):
        for j, (fold, color) in enumerate((("test", "tab:blue"), ("train", "tab:orange"))):
            per = [values(f"{p}-{fold}", key) for p in phases]
            ax.bar(x + (j - 0.5) * 0.38, [np.nanmean(v) for v in per], 0.38, color=color,
                   label="held-out (test fold)" if fold == "test" else "train fold")
            for i, v in enumerate(per):
                ax.scatter(np.full(len(v), x[i] + (j - 0.5) * 0.38), v, color="black", s=8, zorder=3)
        ax.set_xticks(x, [p.upper() if p != "base" else "base LM" for p in phases])
        ax.set(title="success rate" if key == "success" else "mean normalised score", ylim=(0, 1))
        ax.legend(fontsize=8)
    iters = sorted(k for k in results if k.startswith("ppo-i"))
    if iters:
        axes[2].plot(range(len(iters)), [np.nanmean(values(k, "score")) for k in iters], marker="o",
                     label="sampled rollouts: score")
        axes[2].plot(range(len(iters)), [np.nanmean(values(k, "success")) for k in iters], marker="s",
                     label="sampled rollouts: success")
        axes[2].legend(fontsize=8)
    axes[2].set(title="PPO iterations (train fold)", xlabel="iteration")
    fig.suptitle(f"CookingWorld: base LM -> SFT -> PPO{'' if seeds is None else f' (seeds {seeds})'}")
    save_figure(fig, path, dpi=110)
