"""Success rate and off-map rate per policy version (update), from the logged full episodes and evaluations."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ad.history import HistoryReader
from ad.plots import pyplot, save_figure

#: Phases whose rows are whole episodes played by the current actor (sampled).
EPISODE_PHASES = ("critic", "simpo-rollout")


def _read(path: Any):
    """The columns the rates need, from the dataset at ``path`` (a folder, URL or :class:`ad.history.Location`)."""
    return HistoryReader(path).table(columns=["task", "stream", "episode", "update", "phase", "success",
                                                   "off_map"]).to_pandas()


def _episodes_per_update(table, phases: tuple[str, ...]):
    """Success and off-map rate per update (a pandas frame indexed by update) over the episodes of ``phases``."""
    table = table[table["phase"].isin(phases)]
    episodes = table.groupby(["task", "stream", "episode"]).agg(update=("update", "first"), success=("success", "any"),
                                                                off_map=("off_map", "any"))
    return episodes.groupby("update").mean()


def rates_per_update(path: Any, table=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(updates (U,), success rate (U,), off-map rate (U,)) over the episodes of :data:`EPISODE_PHASES`
    (``table``: the dataset's rows if already read)."""
    per = _episodes_per_update(_read(path) if table is None else table, EPISODE_PHASES)
    return per.index.to_numpy(), per["success"].to_numpy(float), per["off_map"].to_numpy(float)


def heldout_rates(path: Any, table=None) -> dict[int, tuple[float, float]]:
    """{update: (success rate, off-map rate)} of the greedy held-out evaluations (phase ``eval``)."""
    per = _episodes_per_update(_read(path) if table is None else table, ("eval",))
    return {int(u): (float(r["success"]), float(r["off_map"])) for u, r in per.iterrows()}


def plot_rates(path: Any, out: str | Path) -> Path:
    """Save the success / off-map rate curves (PNG): sampled episodes on train configurations per policy version,
    and the greedy held-out evaluations (before / after SimPO) as large markers."""
    table = _read(path)  # one read for both curves
    updates, success, off = rates_per_update(path, table)
    fig, ax = pyplot().subplots(figsize=(7, 4))
    ax.plot(updates, success, marker="o", label="success rate (train configs, sampled)")
    ax.plot(updates, off, marker="x", label="off-map rate (train configs, sampled)")
    held = heldout_rates(path, table)
    if held:
        u = sorted(held)
        ax.scatter(u, [held[k][0] for k in u], s=120, marker="*", color="C2", zorder=3,
                   label="success rate (held-out, greedy)")
        ax.scatter(u, [held[k][1] for k in u], s=80, marker="D", color="C3", zorder=3,
                   label="off-map rate (held-out, greedy)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend()
    return save_figure(fig, out, ax, dpi=110, xlabel="policy version (0 = base actor, k = after k SimPO iterations)",
                       ylabel="fraction of episodes")
