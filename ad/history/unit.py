"""One unit (task x run) of a learning history being written: buffered column batches encoded as row groups of
Parquet shards in a staging folder, moved into place in one rename at :meth:`UnitWriter.commit`
(:class:`~ad.history.writer.HistoryWriter` opens units and records them in ``dataset.json``)."""
from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ad.history import layout
from ad.history.provenance import now_iso
from ad.history.spec import arrow_to_numpy, numpy_to_arrow, repeated_string

if TYPE_CHECKING:
    from ad.history.writer import HistoryWriter

#: Integer columns that grow slowly: delta encoding beats dictionaries there.
_DELTA_COLUMNS = ("update", "episode")


def _high_cardinality_float(name: str, arrow_type: pa.DataType) -> bool:
    """Float columns that take almost every value once (logprobs, values): a dictionary only costs time there
    (plain + zstd is as small and ~25% faster to write). Rewards stay dictionary-encoded (few distinct values)."""
    inner = arrow_type.value_type if pa.types.is_list(arrow_type) else arrow_type
    return pa.types.is_floating(inner) and name != "reward"


def _normalise(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists, unknown objects as strings): what dataset.json records."""
    return json.loads(json.dumps(value, default=str))


class UnitWriter:
    """Buffers column batches of one unit and writes them as shards in a staging folder.

    Buffered rows are encoded as a row group of the open shard every ``row_group_rows`` rows; a shard is
    closed once it holds ``shard_rows`` rows (or at :meth:`flush` / :meth:`commit`).
    """

    def __init__(self, writer: HistoryWriter, task: str, run: int) -> None:
        self.writer = writer
        self.task = task
        self.run = run
        loc = writer.location
        self.staging = loc.join(layout.STAGING, layout.unit_dir(task, run))
        self.final = loc.join(layout.unit_dir(task, run))
        # Leftovers of an interrupted attempt at this unit are discarded: it reruns from scratch.
        loc.delete_dir(self.staging)
        loc.delete_dir(self.final)
        loc.makedirs(self.staging)
        self.schema = writer.spec.arrow_schema(writer.file_metadata(task, run))
        self._buffer: list[dict[str, pa.Array]] = []
        self._buffered = 0
        self.rows = 0
        self._parts: list[str] = []
        self._bytes = 0
        self._shard: pq.ParquetWriter | None = None  # the shard being written, if any
        self._shard_rows = 0
        self._done = False

    def append(self, columns: dict[str, Any]) -> None:
        """Append a column batch (numpy arrays of equal length; a stream's rows in time order)."""
        if self._done:
            raise RuntimeError("unit already committed or aborted")
        arrays = self.writer.spec.to_arrays(columns, where=f"unit task={self.task} run={self.run}")
        n = len(arrays["stream"])
        if n == 0:
            return
        self._buffer.append(arrays)
        self._buffered += n
        if self._buffered >= min(self.writer.row_group_rows, self.writer.shard_rows - self._shard_rows):
            self._write_row_group()

    def flush(self) -> None:
        """Write the buffered rows and close the open shard."""
        self._write_row_group()
        self._close_shard()

    def _write_row_group(self) -> None:
        """Encode the buffered rows as one row group (rows grouped by stream, time order kept)."""
        if not self._buffered:
            return
        names = list(self._buffer[0])
        merged = {n: pa.concat_arrays([b[n] for b in self._buffer]) for n in names}
        stream = arrow_to_numpy(merged["stream"])
        if stream.size > 1 and np.any(stream[1:] < stream[:-1]):
            order = numpy_to_arrow(np.argsort(stream, kind="stable"), pa.int64())
            merged = {n: a.take(order) for n, a in merged.items()}
        n = len(stream)
        merged["task"] = repeated_string(self.task, n)
        merged["run"] = numpy_to_arrow(np.full(n, self.run, np.int32), pa.int32())
        table = pa.Table.from_arrays([merged[f.name] for f in self.schema], schema=self.schema)
        if self._shard is None:
            self._open_shard()
        self._shard.write_table(table, row_group_size=n)
        self._shard_rows += n
        self.rows += n
        self._buffer.clear()
        self._buffered = 0
        if self._shard_rows >= self.writer.shard_rows:
            self._close_shard()

    def _open_shard(self) -> None:
        writer = self.writer
        name = f"part-{len(self._parts):05d}.parquet"
        delta = [c for c in _DELTA_COLUMNS if c in self.schema.names]
        plain = [f.name for f in self.schema if _high_cardinality_float(f.name, f.type)]
        dictionary = [c for c in self.schema.names if c not in delta and c not in plain]
        self._shard = pq.ParquetWriter(f"{self.staging}/{name}{layout.PARTIAL_SUFFIX}", self.schema, filesystem=writer.location.fs,
                                       compression=writer.compression, compression_level=writer.compression_level,
                                       use_dictionary=dictionary,
                                       column_encoding={c: "DELTA_BINARY_PACKED" for c in delta},
                                       write_statistics=["update", "episode", "stream"])
        self._parts.append(name)

    def _close_shard(self) -> None:
        if self._shard is None:
            return
        self._shard.close()
        self._shard, self._shard_rows = None, 0
        self._bytes += self.writer.location.size(f"{self.staging}/{self._parts[-1]}{layout.PARTIAL_SUFFIX}")

    def commit(self, info: dict[str, Any] | None = None) -> dict[str, Any]:
        """Flush, move the unit into place in one rename, give its shards their ``.parquet`` names, and record
        it in dataset.json. A crash after the move leaves a marker the next writer adopts (finishing the
        renames); before it, the unit is rerun."""
        self.flush()
        loc = self.writer.location
        record = {"task": self.task, "run": self.run, "rows": self.rows, "bytes": self._bytes,
                  "files": [f"{layout.unit_dir(self.task, self.run)}/{p}" for p in self._parts],
                  "info": _normalise(info or {}), "committed": now_iso()}
        loc.write_json_atomic(f"{self.staging}/{layout.UNIT_MARKER}", record)
        loc.makedirs(loc.join(f"task={self.task}"))
        loc.move(self.staging, self.final)
        for part in self._parts:
            loc.move(f"{self.final}/{part}{layout.PARTIAL_SUFFIX}", f"{self.final}/{part}")
        self._done = True
        self.writer._record(record)
        return record

    def abort(self) -> None:
        """Drop everything written for this unit."""
        self._buffer.clear()
        if self._shard is not None:
            with contextlib.suppress(Exception):  # the staging folder is deleted next anyway
                self._shard.close()
            self._shard = None
        self.writer.location.delete_dir(self.staging)
        self.writer._open.discard(layout.unit_key(self.task, self.run))
        self._done = True
        if self.writer._unsaved:
            self.writer.sync()  # a run that fails here leaves dataset.json listing every unit it committed

    def __enter__(self) -> "UnitWriter":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if self._done:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()
