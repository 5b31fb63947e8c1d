"""Progress of long commands that reads well both on a terminal and in a log file.

On a terminal (stdout is a TTY) :func:`progress_bar` is a tqdm bar on stdout. Anywhere else (``ad demo | tee log``,
``> log``, a notebook, CI) a bar would print nothing useful or a wall of carriage returns, so it prints one plain
line every ``$AD_PROGRESS_SECONDS`` seconds (default 10) and one when it closes::

    step 500/5000 loss 0.123 3.2 step/s eta 23m26s

Every long command reports through this one engine (:mod:`ad.progress.lightning` and :mod:`ad.progress.hf` are the
Lightning and Hugging Face ``Trainer`` callbacks built on it). Importing this package imports neither tqdm nor torch.
"""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")

#: Environment variable: seconds between plain progress lines (0 = a line on every update).
EVERY_ENV = "AD_PROGRESS_SECONDS"
DEFAULT_EVERY = 10.0


def interactive() -> bool:
    """Whether the current stdout is a terminal, where a redrawn bar makes sense."""
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def report_every() -> float:
    """Seconds between plain progress lines: ``$AD_PROGRESS_SECONDS``, else 10."""
    try:
        value = float(os.environ.get(EVERY_ENV, ""))
    except ValueError:  # unset, empty or not a number
        return DEFAULT_EVERY
    return value if math.isfinite(value) and value >= 0 else DEFAULT_EVERY


def format_duration(seconds: float) -> str:
    """``75`` -> ``1m15s``, ``3725`` -> ``1h02m05s``, ``4.2`` -> ``4s``."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(max(seconds, 0.0)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_value(value: Any) -> str:
    """A metric for a progress line: 4 significant digits for floats (and 0-d tensors), str() otherwise."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class PlainProgress:
    """A progress counter that prints ``[desc: ]unit n/total [postfix] rate unit/s eta ...`` lines, at most one
    every ``every`` seconds, plus one on :meth:`close` (tqdm's ``update`` / ``set_postfix`` / ``write`` / ``close``
    subset, so callers can hold either)."""

    def __init__(self, total: int | None, desc: str = "", unit: str = "it", initial: int = 0,
                 every: float | None = None, file: TextIO | None = None):
        self.total = total
        self.desc = desc
        self.unit = unit
        self.n = initial
        self.every = report_every() if every is None else every
        self.file = file
        self._initial = initial
        self._start = self._last = time.perf_counter()
        self._postfix: dict[str, Any] = {}
        self._closed = False
        self.lines = 0  #: lines printed so far

    # ---------------------------------------------------------------- tqdm-like API
    def update(self, n: int = 1) -> None:
        self.set(self.n + n)

    def set(self, n: int) -> None:
        """Move the counter to ``n``; print a line when ``every`` seconds passed since the last one."""
        self.n = n
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            self._print(self.line(now))

    def set_postfix(self, ordered_dict: dict[str, Any] | None = None, refresh: bool = True, **kwargs: Any) -> None:
        self._postfix = {**(ordered_dict or {}), **kwargs}

    def write(self, text: str) -> None:
        self._print(text)

    def close(self, done: bool = True) -> None:
        """Print the final line (once): ``... done in 1m15s``, or ``... stopped after 1m15s`` if not ``done``."""
        if self._closed:
            return
        self._closed = True
        now = time.perf_counter()
        self._print(f"{self.line(now)} {'done in' if done else 'stopped after'} {format_duration(now - self._start)}")

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    # ---------------------------------------------------------------- the line
    def line(self, now: float | None = None) -> str:
        """``[desc: ]unit n/total [key value ...] rate unit/s eta ...``."""
        now = time.perf_counter() if now is None else now
        elapsed = now - self._start
        done = self.n - self._initial
        rate = done / elapsed if elapsed > 0 else 0.0
        count = f"{self.unit} {self.n}" + (f"/{self.total}" if self.total else "")
        parts = [f"{self.desc}:" if self.desc else "", count]
        parts += [f"{key} {format_value(value)}" for key, value in self._postfix.items()]
        parts.append(f"{rate:,.0f} {self.unit}/s" if rate >= 100 else f"{rate:.3g} {self.unit}/s")
        if self.total and rate > 0 and self.n < self.total:
            parts.append(f"eta {format_duration((self.total - self.n) / rate)}")
        return " ".join(p for p in parts if p)

    def _print(self, text: str) -> None:
        self.lines += 1
        print(text, file=self.file or sys.stdout, flush=True)


def progress_bar(total: int | None, desc: str = "", unit: str = "it", initial: int = 0, leave: bool = True,
                 every: float | None = None) -> Any:
    """A tqdm bar on a terminal, else :class:`PlainProgress` lines (both on stdout; see the module docstring)."""
    if interactive():
        from tqdm import tqdm

        return tqdm(total=total, desc=desc or None, unit=unit, initial=initial, leave=leave, file=sys.stdout,
                    dynamic_ncols=True)
    return PlainProgress(total, desc, unit, initial=initial, every=every)


def track(items: Iterable[T], desc: str = "", unit: str = "it", total: int | None = None) -> Iterator[T]:
    """Iterate ``items`` with a :func:`progress_bar` (``total`` defaults to ``len(items)``)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(total, desc=desc, unit=unit) as bar:  # "stopped after" in a log where the loop did not finish
        for item in items:
            yield item
            bar.update(1)


class Progress:
    """A counter with metrics on the one engine: a bar on a terminal, plain lines in a log, nothing when ``show`` is
    false. ``update(n, **metrics)`` advances by ``n`` and shows the metrics (formatted by :func:`format_value`) as a
    new measurement: in a log it is printed in one line, and the lines after it leave it out rather than repeat an
    old figure."""

    def __init__(self, total: int | None, desc: str = "", unit: str = "it", show: bool = True, initial: int = 0,
                 every: float | None = None) -> None:
        self.bar = progress_bar(total, desc=desc, unit=unit, initial=initial, every=every) if show else None

    def update(self, n: int = 1, **metrics: Any) -> None:
        """Advance by ``n`` (0: only show new metrics)."""
        if self.bar is None:
            return
        if metrics:
            self.bar.set_postfix({k: format_value(v) for k, v in metrics.items()}, refresh=False)
        if n:
            plain = isinstance(self.bar, PlainProgress)
            printed = self.bar.lines if plain else 0
            self.bar.update(n)
            if plain and self.bar.lines != printed:  # the measurement went out in a line: do not repeat it
                self.bar.set_postfix({})

    def write(self, text: str) -> None:
        """A line of its own above the bar (or between the plain lines)."""
        if self.bar is not None:
            self.bar.write(text)

    def close(self, done: bool = True) -> None:
        """The last line (``done in ...`` or ``stopped after ...``) in a log; the bar's end on a terminal."""
        bar, self.bar = self.bar, None
        close_bar(bar, done)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> bool:
        self.close(done=exc_type is None)
        return False


def close_bar(bar: Any, done: bool) -> None:
    """Close a :func:`progress_bar` (None: nothing); in a log its last line says ``done in`` or ``stopped after``."""
    if isinstance(bar, PlainProgress):
        bar.close(done=done)
    elif bar is not None:
        bar.close()


class PhaseLog:
    """Timestamped lines of a run made of phases (``textworld 1m15s: SFT done, loss 0.057``), or nothing when
    ``show`` is false."""

    def __init__(self, desc: str, show: bool = True, file: TextIO | None = None) -> None:
        self.desc, self.show, self.file = desc, show, file
        self.started = time.perf_counter()

    def __call__(self, text: str) -> None:
        if self.show:
            elapsed = format_duration(time.perf_counter() - self.started)
            print(f"{self.desc} {elapsed}: {text}", file=self.file or sys.stdout, flush=True)
