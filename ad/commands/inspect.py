"""`ad inspect PATH`: what a learning-history dataset holds, as a table (and learning curves as a PNG)."""
from __future__ import annotations

import sys
from dataclasses import dataclass

from ad.config import option, refuse
from ad.plots import figure_path, plot_learning_curves
from ad.registry import default_dataset, register


#: File name of the learning curves when --plot names a folder.
CURVES_FILE = "learning_curves.png"


@dataclass
class InspectConfig:
    """Summarise a learning-history dataset."""

    path: str | None = option(None, "dataset folder or URL (default: the one `ad generate` writes for the default "
                                    "task family)", positional=True)
    plot: str | None = option(None, "write per-task learning curves to this file (.png, .pdf, .svg ...; an existing "
                                    "folder: learning_curves.png in it)")
    fraction: float = option(0.1, "share of each stream's episodes averaged for the first/last return columns")

    def __post_init__(self) -> None:
        if self.path is None:
            self.path = default_dataset()
        refuse(self, ("fraction",), lambda v: not 0 < v <= 0.5, "must be in (0, 0.5]")
        if self.plot:
            figure_path(self.plot, "--plot", CURVES_FILE)  # refuses an extension no writer takes, before reading


def inspect(config: InspectConfig) -> list[dict]:
    """Print the summary table; return its rows."""
    from rich.console import Console
    from rich.table import Table

    from ad.history import HistoryReader, summarize

    reader = HistoryReader(config.path)
    note = reader.incomplete_note()
    if note:
        print(f"warning: {note}", file=sys.stderr)
    rows = summarize(reader, config.fraction)
    pct = int(config.fraction * 100)
    table = Table(title=f"{config.path}  ({reader.family}, {reader.num_transitions():,} transitions)")
    for name in ("task", "runs", "streams", "episodes", "transitions", "bytes/transition",
                 f"return first {pct}%", f"return last {pct}%"):
        table.add_column(name, justify="left" if name == "task" else "right")
    for row in rows:
        table.add_row(row["task"], str(row["runs"]), str(row["streams"]), f"{row['episodes']:,}",
                      f"{row['transitions']:,}", f"{row['bytes_per_transition']:.2f}",
                      f"{row['return_first']:.3f}", f"{row['return_last']:.3f}")
    console = Console(width=140)
    console.print(table)
    split = reader.metadata.get("split") or {}
    if split:
        console.print(f"split: {len(split.get('train', []))} train tasks, {len(split.get('heldout', []))} held-out")
    if config.plot:
        from ad.history.summary import learning_curves

        curves = learning_curves(reader)
        out = plot_learning_curves(curves, figure_path(config.plot, "--plot", CURVES_FILE),
                                   title=f"Learning curves: {config.path}")
        console.print(f"wrote {out}")
    return rows


register("ad", "inspect", InspectConfig, inspect, "summarise a learning-history dataset (table, --plot PNG)")
