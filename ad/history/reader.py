"""Read learning-history datasets: units, tables, and each stream's columns as contiguous arrays."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ad.errors import SchemaError, UserError
from ad.history import layout
from ad.history.manifest import read_manifest
from ad.history.spec import HistorySpec
from ad.history.storage import Location


@dataclass
class Stream:
    """One ordered learning history (one actor / env slot of one run), columns in time order."""

    task: str
    run: int
    stream: int
    columns: dict[str, Any]

    def __len__(self) -> int:
        return len(self.columns["episode"]) if "episode" in self.columns else len(next(iter(self.columns.values())))


def column_to_numpy(array: pa.Array | pa.ChunkedArray) -> Any:
    """Arrow column -> numpy: primitives zero-copy, fixed-size lists as (n, dim), others as object arrays."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    t = array.type
    if pa.types.is_fixed_size_list(t):
        return array.flatten().to_numpy().reshape(len(array), t.list_size)
    if pa.types.is_dictionary(t):
        array = array.dictionary_decode()
    return array.to_numpy(zero_copy_only=False)  # still a view of the buffer where one can be


class HistoryReader:
    """Reads a dataset written by :class:`ad.history.HistoryWriter` (only complete units)."""

    def __init__(self, path: Any, filesystem: Any = None) -> None:
        self.location = Location.of(path, filesystem)
        json_path = self.location.join(layout.DATASET_JSON)
        if not self.location.exists(json_path):
            raise UserError(f"{self.location} is not a learning-history dataset (no {layout.DATASET_JSON}); "
                            f"create one with `ad generate <task> --out {self.location}`")
        meta = read_manifest(self.location)
        self.metadata: dict[str, Any] = meta
        self.spec = HistorySpec.from_dict(meta["spec"])
        self.family: str = meta["family"]
        self._units: list[dict[str, Any]] = sorted(meta.get("units", {}).values(),
                                                   key=lambda u: (u["task"], int(u["run"])))
        self._types = self.spec.column_types()

    # ------------------------------------------------------------------ listing
    def units(self, tasks: Iterable[str] | None = None, runs: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """Records of the complete units, optionally filtered."""
        task_set = None if tasks is None else set(tasks)
        run_set = None if runs is None else {int(r) for r in runs}
        return [u for u in self._units if (task_set is None or u["task"] in task_set)
                and (run_set is None or int(u["run"]) in run_set)]

    def tasks(self) -> list[str]:
        return sorted({u["task"] for u in self._units})

    def num_transitions(self) -> int:
        return sum(int(u["rows"]) for u in self._units)

    def completeness(self) -> tuple[int, int | None]:
        """(tasks with a complete unit, tasks the generating command planned); the plan is None where the dataset
        does not record one (written before datasets recorded it, or by a command that cannot know)."""
        planned = self.metadata.get("planned_tasks")
        return len(self.tasks()), int(planned) if isinstance(planned, int) and not isinstance(planned, bool) else None

    def incomplete_note(self) -> str | None:
        """``"<path> is incomplete: 2 of 12 tasks; re-run ..."`` when fewer tasks are complete than the command
        that wrote the dataset planned (its generation was interrupted), else None."""
        done, planned = self.completeness()
        if planned is None or done >= planned:
            return None
        return (f"dataset {self.location} is incomplete: {done} of {planned} tasks; re-run the generate command "
                f"that made it (`ad generate {self.family} ... --out {self.location}`, same options) to finish")

    def require_complete(self, allow: bool) -> None:
        """UserError if the dataset is incomplete (see :meth:`incomplete_note`), unless ``allow`` (the command's
        ``--allow-incomplete``), then a warning on stderr."""
        note = self.incomplete_note()
        if note is not None and not allow:
            raise UserError(f"{note}; or pass --allow-incomplete to use the tasks it holds")
        if note is not None:
            print(f"warning: {note}", file=sys.stderr)

    def require_units(self, units: list[dict[str, Any]]) -> None:
        """UserError if ``units`` (a selection of this dataset's) is empty."""
        if not units:
            raise UserError(f"dataset {self.location} holds no complete units; run (or finish) `ad generate` first")

    # ------------------------------------------------------------------ reading
    def _read_file(self, relpath: str, columns: Sequence[str] | None) -> pa.Table:
        path = self.location.join(relpath)
        if not self.location.exists(path):
            raise SchemaError(f"shard {path} is missing; re-run the `ad generate` command that made the dataset "
                              f"(same options and --out): it regenerates the units whose shards are missing or "
                              "damaged and keeps the others")

        def damaged(what: str) -> SchemaError:
            return SchemaError(f"shard {path} {what}; delete its unit folder ({relpath.rsplit('/', 1)[0]}) and re-run "
                               "the `ad generate` command that made the dataset (same options and --out): it "
                               "regenerates that unit")

        try:
            file = pq.ParquetFile(path, filesystem=self.location.fs)
            schema = file.schema_arrow
        except (pa.ArrowInvalid, OSError) as err:
            raise damaged(f"is corrupt or not Parquet ({err})") from None
        wanted = list(columns) if columns is not None else list(self._types)
        for name in wanted:
            if name not in self._types:
                raise UserError(f"unknown column {name!r}; dataset columns are {', '.join(self._types)}")
            index = schema.get_field_index(name)
            if index < 0:
                raise SchemaError(f"shard {path} has no column {name!r}; it was written with another schema")
            if schema.field(index).type != self._types[name]:
                raise SchemaError(f"shard {path}: column {name!r} has type {schema.field(index).type}, expected "
                                  f"{self._types[name]}; the file comes from another schema version or task")
        try:
            return file.read(columns=wanted, use_threads=True)
        except (pa.ArrowInvalid, OSError) as err:
            raise damaged(f"is corrupt ({err})") from None

    def table(self, tasks: Iterable[str] | None = None, runs: Iterable[int] | None = None,
              columns: Sequence[str] | None = None) -> pa.Table:
        """All rows of the selected units as one Arrow table."""
        units = self.units(tasks, runs)
        self.require_units(units)
        return pa.concat_tables([self._read_file(f, columns) for u in units for f in u["files"]])

    def iter_unit_streams(self, unit: dict[str, Any], columns: Sequence[str] | None = None,
                          streams: Iterable[int] | None = None) -> list[Stream]:
        """Streams of one unit, each column a contiguous numpy array in time order."""
        cols = list(columns) if columns is not None else [c for c in self._types if c not in ("task", "run")]
        read_cols = cols if "stream" in cols else ["stream", *cols]
        tables = [self._read_file(f, read_cols) for f in unit["files"]]
        if not tables:
            return []
        table = pa.concat_tables(tables)
        stream_ids = column_to_numpy(table.column("stream"))
        order: Any = slice(None)  # rows already grouped by stream: views, no copy
        if stream_ids.size > 1 and np.any(stream_ids[1:] < stream_ids[:-1]):
            small = stream_ids.astype(np.int16) if stream_ids.max() < 2**15 else stream_ids
            order = np.argsort(small, kind="stable")
        stream_ids = stream_ids[order]
        arrays = {c: column_to_numpy(table.column(c))[order] for c in cols}
        self._check_values(unit, arrays)
        bounds = [0, *(np.flatnonzero(np.diff(stream_ids)) + 1).tolist(), len(stream_ids)]  # each stream's rows
        wanted = None if streams is None else {int(s) for s in streams}
        return [Stream(unit["task"], int(unit["run"]), int(stream_ids[a]), {c: v[a:b] for c, v in arrays.items()})
                for a, b in zip(bounds, bounds[1:]) if wanted is None or int(stream_ids[a]) in wanted]

    def _check_values(self, unit: dict[str, Any], arrays: dict[str, Any]) -> None:
        """SchemaError unless discrete states / actions lie in [0, n) and rewards are finite (logprobs may be
        NaN where the behaviour policy's is unknown)."""
        where = f"unit task={unit['task']} run={unit['run']} ({', '.join(unit['files'])})"
        for name in ("state", "action"):
            column = getattr(self.spec, name)
            values = arrays.get(name)
            if column.kind != "discrete" or values is None or not len(values):
                continue
            bad = np.flatnonzero((values < 0) | (values >= column.n))
            if bad.size:
                raise SchemaError(f"{where}: column {name!r} holds {values[bad[0]]} at row {bad[0]}, outside "
                                  f"0..{column.n - 1} of the dataset's spec; the shard was written by another "
                                  "task or edited: regenerate that unit (delete its folder and re-run the "
                                  "`ad generate` command)")
        rewards = arrays.get("reward")
        if isinstance(rewards, np.ndarray) and rewards.dtype.kind == "f":
            bad = np.flatnonzero(~np.isfinite(rewards))
            if bad.size:
                raise SchemaError(f"{where}: column 'reward' holds {rewards[bad[0]]} at row {bad[0]}; rewards must "
                                  "be finite: regenerate that unit (delete its folder and re-run the `ad generate` "
                                  "command)")

    def streams(self, tasks: Iterable[str] | None = None, runs: Iterable[int] | None = None,
                streams: Iterable[int] | None = None, columns: Sequence[str] | None = None) -> list[Stream]:
        """Every selected stream, columns as contiguous numpy arrays (time order)."""
        units = self.units(tasks, runs)
        self.require_units(units)
        return [stream for unit in units for stream in self.iter_unit_streams(unit, columns, streams)]

    def to_hf_dataset(self, tasks: Iterable[str] | None = None, columns: Sequence[str] | None = None):
        """The selected rows as a Hugging Face ``datasets.Dataset`` (task decoded to plain strings)."""
        import datasets

        return datasets.Dataset(self.table(tasks, columns=columns))


def task_split(reader: "HistoryReader", heldout_fraction: float = 0.2, seed: int = 0) -> tuple[list[str], list[str]]:
    """(train tasks, held-out tasks) among the dataset's complete tasks: the split the generator recorded.

    Uses ``metadata["split"]`` when the generator recorded one; otherwise holds out a
    deterministic ``heldout_fraction`` of tasks chosen with ``seed``.
    """
    present = reader.tasks()
    split = reader.metadata.get("split")
    if split:
        train = [t for t in split.get("train", []) if t in present]
        heldout = [t for t in split.get("heldout", []) if t in present]
    else:
        order = np.random.default_rng(seed).permutation(len(present))
        k = int(round(len(present) * heldout_fraction))
        heldout = sorted(present[i] for i in order[:k])
        train = sorted(t for t in present if t not in heldout)
    if not train:
        raise UserError(f"dataset {reader.location.base} has no complete training tasks; finish `ad generate` first")
    return train, heldout
