"""Progress display of the batched A2C generators (DarkRoom, Key-to-Door): updates, env steps/s, mean return."""
from __future__ import annotations

from typing import Any

import numpy as np


class A2CProgressOff:
    """No progress display (``--progress false``, Ray workers)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, **kwargs):
        pass


class _Bar:
    """A rich progress bar over updates showing env steps/s and the recent mean return."""

    def __init__(self, total: int, what: str = "A2C updates"):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn(f"[bold]{what}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[rate]:>9,.0f} env steps/s"),
                                 TextColumn("mean return {task.fields[ret]:.3f}"), TimeRemainingColumn())
        self.task = self.progress.add_task("a2c", total=total, rate=0.0, ret=float("nan"))

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def update(self, advance: int = 0, **fields):
        self.progress.update(self.task, advance=advance, **fields)


class _Lines:
    """Plain progress lines (``A2C updates: update 600/2400 env_steps_per_s 223,849 mean_return 0.987 ...``) for a
    log file or pipe, where rich would draw nothing until the end."""

    def __init__(self, total: int, what: str):
        from ad.progress import PlainProgress

        self.bar = PlainProgress(total, what, unit=what.split()[-1].rstrip("s"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.bar.close(done=exc[0] is None)
        return False

    def update(self, advance: int = 0, rate: float | None = None, ret: float | None = None, **_: Any) -> None:
        """Count ``advance`` units; ``rate`` / ``ret`` are new measurements. A mean return is printed in one line
        only: the lines after it (before the next measurement) leave it out rather than repeat an old figure."""
        if rate is not None:
            self.bar.set_postfix(env_steps_per_s=f"{rate:,.0f}",
                                 mean_return=f"{ret:.3f}" if ret is not None and np.isfinite(ret) else "-")
        printed = self.bar._last
        self.bar.update(advance)
        if self.bar._last != printed:  # a line went out: its mean return is now shown
            self.bar.set_postfix({k: v for k, v in self.bar._postfix.items() if k != "mean_return"})


def a2c_progress(show: bool, total: int, what: str = "A2C updates"):
    """A rich bar on a terminal, plain periodic lines in a log or pipe, nothing when ``show`` is false."""
    from ad.progress import interactive

    if not show:
        return A2CProgressOff()
    return _Bar(total, what) if interactive() else _Lines(total, what)
