"""Rows of the completions a TRL trainer samples, buffered per chunk of training iterations and committed as one
history unit (task ``<prefix>-c<chunk>``, run = the run's seed)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ad.history import HistoryWriter


def chunk_task(prefix: str, chunk: int) -> str:
    """Task name of the unit that holds the training iterations of chunk ``chunk``."""
    return f"{prefix}-c{chunk:04d}"


def chunk_of(task: str) -> int:
    """The chunk index of a unit's task name (inverse of :func:`chunk_task`)."""
    return int(task.rsplit("-c", 1)[1])


class ChunkLog:
    """Buffers column batches (one row per sampled completion) until :meth:`commit` writes them as one unit; a
    family's log subclasses it with an ``add`` that turns a generation batch into columns and calls :meth:`append`."""

    def __init__(self, writer: HistoryWriter, run: int, prefix: str) -> None:
        self.writer, self.run, self.prefix = writer, run, prefix
        self._parts: list[dict[str, Any]] = []
        self.rows_logged = 0

    def append(self, columns: dict[str, Any]) -> None:
        """Buffer one batch of rows (every column the dataset's spec has, all of one length)."""
        self._parts.append(columns)

    def printer(self, show: bool) -> Callable[[int, int], None]:
        """An ``on_commit(chunk, rows)`` that prints each committed unit (nothing unless ``show``)."""
        def on_commit(chunk: int, rows: int) -> None:
            if show:
                print(f"\ncommitted unit {chunk_task(self.prefix, chunk)}: {rows} rows", flush=True)
        return on_commit

    def columns(self) -> dict[str, Any]:
        """The buffered rows as one column batch, in the order they were added."""
        if not self._parts:
            return {}
        out: dict[str, Any] = {}
        for name, first in self._parts[0].items():
            values = [part[name] for part in self._parts]
            out[name] = np.concatenate(values) if isinstance(first, np.ndarray) else [v for vs in values for v in vs]
        return out

    def commit(self, chunk: int, info: dict[str, Any]) -> int:
        """Write the buffered rows as unit ``chunk`` (atomically) and clear the buffer; returns the row count."""
        cols = self.columns()
        rows = len(cols.get("stream", ()))
        with self.writer.unit(chunk_task(self.prefix, chunk), self.run) as unit:  # aborted on any exception
            if rows:
                unit.append(cols)
            unit.commit(info={**info, "rows": rows})
        self._parts.clear()
        self.rows_logged += rows
        return rows
