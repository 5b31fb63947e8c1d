"""Matplotlib figures (headless, Agg backend): learning curves and in-context curves."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from ad.errors import UserError
from ad.files import atomic_path


def pyplot():
    """matplotlib.pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: File types a figure is written as (the extension of the path picks one; all are Agg / matplotlib writers).
FIGURE_TYPES = ("png", "pdf", "svg", "jpg", "jpeg", "webp", "tif", "tiff", "eps", "ps")


def figure_path(path: str | Path, option: str, default_name: str) -> Path:
    """Where a figure asked for with ``option path`` is written: ``path/default_name`` for an existing folder,
    ``path`` + ``.png`` without an extension, else ``path``; UserError for an extension no writer takes."""
    out = Path(path).expanduser()
    if out.is_dir():
        return out / default_name
    if not out.suffix:
        return out.with_name(out.name + ".png")
    if out.suffix[1:].lower() not in FIGURE_TYPES:
        raise UserError(f"{option} {path}: figures are written as {', '.join('.' + t for t in FIGURE_TYPES)}; "
                        "choose a file name with one of these extensions")
    return out


def save_figure(fig, out: str | Path, ax=None, dpi: int = 120, **labels: str) -> Path:
    """Label and grid ``ax`` (``labels``: its xlabel, ylabel, title) if given, lay out, write (atomically, creating
    the folder) and close a figure; returns the PNG path."""
    if ax is not None:
        ax.set(**labels)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(out)
    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        pyplot().close(fig)
    return out


def finish_rate_panel(ax, xlabel: str, ylabel: str, title: str) -> None:
    """Label one panel whose y axis is a rate in [0, 1] (a success rate): limits just outside [0, 1], a small title
    and legend, a light grid."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def smooth(values: np.ndarray, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Average ``values`` into at most ``points`` bins; returns (bin centres, means)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) <= points:
        return np.arange(len(values)), values
    edges = np.linspace(0, len(values), points + 1).astype(int)
    means = np.add.reduceat(values, edges[:-1]) / np.diff(edges)
    return (edges[:-1] + edges[1:]) / 2, means


def plot_learning_curves(curves: Mapping[str, np.ndarray], out: str | Path, title: str = "Learning curves") -> Path:
    """Per-task mean episode return vs episode index (thin lines) and their mean (bold)."""
    fig, ax = pyplot().subplots(figsize=(8, 4.5))
    series = [smooth(np.asarray(curve, dtype=np.float64)) for curve in curves.values()]  # (x, means) of each task
    for x, ys in series:
        ax.plot(x, ys, lw=0.7, alpha=0.35)
    if series:
        n = min(len(s[1]) for s in series)
        ax.plot(series[0][0][:n], np.mean([s[1][:n] for s in series], axis=0), color="black", lw=2.2,
                label=f"mean over {len(series)} tasks")
        ax.legend(loc="lower right")
    return save_figure(fig, out, ax, xlabel="episode", ylabel="episode return", title=title)


def band(mean: np.ndarray, spread: np.ndarray, optimum: float) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the band mean ± spread, clipped to [min(0, lowest mean), max(optimum, highest mean)]."""
    mean, spread = np.asarray(mean, dtype=np.float64), np.asarray(spread, dtype=np.float64)
    if not mean.size:
        return mean, mean
    floor = min(0.0, float(np.min(mean)))
    ceiling = max(float(optimum), float(np.max(mean))) if np.isfinite(optimum) else float(np.max(mean))
    return np.clip(mean - spread, floor, ceiling), np.clip(mean + spread, floor, ceiling)


#: Colours of the curves of an in-context comparison, by name.
CURVE_COLOURS = {"AD": "tab:blue", "ED": "tab:orange", "DPT": "tab:red", "source": "tab:green", "random": "tab:gray"}


def plot_in_context(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], optimum: float, out: str | Path,
                    title: str = "In-context return on held-out tasks",
                    colours: Mapping[str, str] | None = None) -> Path:
    """Mean episode return per episode in context, for each named policy ``name -> (mean, spread)``, a band of
    mean ± spread (``ad eval`` passes the standard error), and the optimum.

    The band is clipped to the returns that can occur, [min(0, lowest mean), max(optimum, highest mean)], so it
    never shows a return below 0 or above the optimum that no run had. A curve's colour is looked up by the first
    word of its name in ``colours``, then in :data:`CURVE_COLOURS`."""
    palette = {**CURVE_COLOURS, **(colours or {})}
    fig, ax = pyplot().subplots(figsize=(8, 4.5))
    for name, (mean, spread) in curves.items():
        x = np.arange(1, len(mean) + 1)
        colour = palette.get(name.split(" ")[0])
        ax.plot(x, mean, label=name, color=colour, lw=2 if name.startswith("AD") else 1.4)
        low, high = band(mean, spread, optimum)
        ax.fill_between(x, low, high, color=colour, alpha=0.15)
    ax.axhline(optimum, color="black", ls="--", lw=1, label=f"optimal ({optimum:.1f})")
    ax.legend(loc="best", fontsize=8)
    return save_figure(fig, out, ax, xlabel="episode in context",
                       ylabel="episode return (mean ± standard error over tasks × seeds)", title=title)
