"""Append learning histories to Hive-partitioned Parquet shards, atomically and resumably.

Work is split into *units* (one task x run). A unit is written into a hidden
staging folder, then moved into place in one rename and recorded in
``dataset.json`` (updated last, atomically). Readers only ever see complete
units; an interrupted run leaves a dataset that reads cleanly, and the next run
with the same arguments skips complete units and redoes the others from scratch.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

from ad.errors import UserError
from ad.files import check_folder_path
from ad.history import layout
from ad.history.lock import DatasetLock
from ad.history.manifest import read_manifest, settings_differences
from ad.history.provenance import now_iso, provenance
from ad.history.spec import SCHEMA_VERSION, HistorySpec
from ad.history.storage import Location
from ad.history.unit import UnitWriter, _normalise

#: Key of the JSON header in every shard's Parquet schema metadata.
SHARD_METADATA_KEY = b"ad.dataset"
#: dataset.json keys copied into every shard's header (each bounded in size, whatever the number of tasks).
SHARD_KEYS = ("task_spec", "source", "seeds")
#: dataset.json keys that describe the dataset's state, not its settings (a resume may differ in them).
STATE_KEYS = ("provenance", "units", "updated", "planned_tasks")
_RESERVED = {"format", "schema_version", "family", "spec", *STATE_KEYS}

#: Most of the wall time rewriting dataset.json after unit commits may take (see HistoryWriter._save_due).
JSON_TIME_SHARE = 0.05
#: dataset.json rewrites faster than this (seconds) happen after every commit.
JSON_CHEAP_SECONDS = 0.01


def user_metadata(manifest: dict[str, Any]) -> dict[str, Any]:
    """The metadata a writer was given, out of a dataset's ``dataset.json`` (``HistoryReader.metadata``): without the
    header and state keys the store adds, so that it can be handed to a new :class:`HistoryWriter`."""
    return {k: v for k, v in manifest.items() if k not in _RESERVED}


class HistoryWriter:
    """Writes one learning-history dataset (the schema: docs/design.md).

    Args:
        out: folder or URL of the dataset.
        spec: column layout (state / action / logprob kinds, extra columns).
        family: task family name (e.g. "darkroom"); an existing dataset of another family is refused.
        metadata: dataset-level metadata (task_spec, source, seeds, split, tasks ...). Resuming needs
            the same metadata, so a run with different arguments cannot mix into an old dataset.
        shard_rows: rows per shard (Parquet file) of a unit.
        row_group_rows: rows buffered per unit before they are encoded as one row group of the open shard
            (default: ``shard_rows``); smaller row groups spread the encoding over the run.
        compression: Parquet codec of every column.
        compression_level: level of that codec.
        filesystem: optional pyarrow or fsspec filesystem for ``out``.
        planned_tasks: every task the command will write (or their number), recorded so that readers can tell
            an interrupted generation (:meth:`~ad.history.HistoryReader.incomplete_note`). Default: keep the record.
        worker: write units only, never ``dataset.json`` (a distributed worker, :mod:`ad.distributed`: the driver
            created the dataset and records each committed unit with :meth:`record_unit`).
    """

    def __init__(self, out: Any, spec: HistorySpec, family: str, metadata: dict[str, Any] | None = None,
                 *, shard_rows: int = 1 << 20, row_group_rows: int | None = None, compression: str = "zstd",
                 compression_level: int | None = 3, filesystem: Any = None, worker: bool = False,
                 planned_tasks: Any = None) -> None:
        self.location = Location.of(out, filesystem)
        self.spec = spec
        self.family = family
        self.metadata = _normalise(metadata or {})
        clash = _RESERVED & set(self.metadata)
        if clash:
            raise ValueError(f"metadata keys {sorted(clash)} are reserved")
        self.shard_rows = int(shard_rows)
        self.row_group_rows = min(int(row_group_rows or shard_rows), self.shard_rows)
        self.compression = compression
        self.compression_level = compression_level
        self.worker = worker
        self._planned = planned_tasks if planned_tasks is None or isinstance(planned_tasks, int) \
            else len(set(planned_tasks))
        self._units: dict[str, dict[str, Any]] = {}
        self._open: set[str] = set()
        self._task_split: dict[str, str] | None = None  # task -> split name, for shard headers
        self._saved_at, self._save_seconds = float("-inf"), 0.0
        self._unsaved = False  # units recorded since dataset.json was last written
        self._prepare()

    # ------------------------------------------------------------------ dataset.json
    @property
    def _json_path(self) -> str:
        return self.location.join(layout.DATASET_JSON)

    def _header(self, keys: Any = None) -> dict[str, Any]:
        """Format, schema version, family, column spec and the metadata (only its ``keys``, in that order)."""
        meta = self.metadata if keys is None else {k: self.metadata[k] for k in keys if k in self.metadata}
        return {"format": layout.FORMAT_NAME, "schema_version": SCHEMA_VERSION, "family": self.family,
                "spec": self.spec.to_dict(), **meta}

    def _prepare(self) -> None:
        loc = self.location
        if loc.is_file(loc.base):
            raise UserError(f"--out {loc} is a file, not a folder; choose a new or empty folder")
        if loc.local_path() is not None:
            check_folder_path(loc.local_path())
        if self.worker and not loc.exists(self._json_path):
            raise RuntimeError(f"{self._json_path} does not exist: the driver creates the dataset before workers "
                               "write units into it")
        self._lock = None if self.worker else DatasetLock.acquire(loc)
        if loc.exists(self._json_path):
            existing = read_manifest(loc)
            self._units = dict(existing.get("units", {}))
            self._provenance = existing.get("provenance") or provenance()
            if self._planned is None:
                self._planned = existing.get("planned_tasks")
            if self.worker:
                self._check_compatible(existing)
                return
            self._adopt_orphans()
            if self._units or existing.get("family") != self.family:  # (another task's dataset is refused)
                self._check_compatible(existing)
            else:  # nothing committed yet (e.g. a run that failed at its start): the new settings replace the old
                self._provenance = provenance()
        else:
            visible = [n for n in loc.listdir(loc.base) if not n.startswith(".")]
            if visible:
                raise UserError(f"output folder {loc} is not empty and holds no {layout.DATASET_JSON} "
                                f"(found {', '.join(visible[:5])}); choose an empty or new --out folder")
            loc.makedirs(loc.base)
            self._provenance = provenance()
            self._adopt_orphans()
        self._drop_damaged_units()
        self._save()

    def _check_compatible(self, existing: dict[str, Any]) -> None:
        if existing.get("family") != self.family:
            raise UserError(f"{self.location} holds a {existing.get('family')!r} dataset, not {self.family!r}; "
                            "choose another --out folder (nothing was overwritten)")
        differing = settings_differences({k: v for k, v in existing.items() if k not in STATE_KEYS}, self._header())
        if differing:
            raise UserError(f"{self.location} was generated with different settings: {'; '.join(differing)}. "
                            "Re-run with the dataset's values to resume, or choose another --out folder (nothing "
                            f"was overwritten; {self._json_path} records the settings)")

    def _adopt_orphans(self) -> None:
        """Record units moved into place by a run that died before updating dataset.json (and finish naming
        their shards, if it died between moving the unit folder and renaming them)."""
        loc = self.location
        for task_dir in loc.listdir(loc.base):
            if not task_dir.startswith("task="):
                continue
            for run_dir in loc.listdir(loc.join(task_dir)):
                marker = loc.join(task_dir, run_dir, layout.UNIT_MARKER)
                if not loc.exists(marker):
                    continue
                record = loc.read_json(marker)
                for file in record["files"]:
                    partial = loc.join(file) + layout.PARTIAL_SUFFIX
                    if loc.exists(partial):
                        loc.move(partial, loc.join(file))
                key = layout.unit_key(record["task"], record["run"])
                if key not in self._units:
                    self._units[key] = record

    def _drop_damaged_units(self) -> None:
        """Forget committed units whose shards are missing or of another size than when they were written
        (deleted, truncated): their folders are removed, so the command that made them regenerates them."""
        loc = self.location
        sizes = loc.sizes(loc.base)
        for key, record in list(self._units.items()):
            files = record.get("files", [])
            missing = [f for f in files if f not in sizes]
            total = sum(sizes.get(f, 0) for f in files)
            expected = int(record.get("bytes") or 0)
            if not missing and (not expected or total == expected):
                continue
            why = f"shard {missing[0]} is missing" if missing else f"its shards hold {total} bytes, not {expected}"
            print(f"repairing {loc}: unit task={record['task']} run={record['run']} is damaged ({why}); "
                  "it is removed and will be regenerated", file=sys.stderr)
            loc.delete_dir(loc.join(layout.unit_dir(record["task"], record["run"])))
            del self._units[key]

    def _save(self) -> None:
        started = time.perf_counter()
        data = {**self._header(), "provenance": self._provenance, "units": self._units, "updated": now_iso()}
        if self._planned is not None:
            data["planned_tasks"] = int(self._planned)
        self.location.write_json_atomic(self._json_path, data)
        self._unsaved = False
        self._saved_at = time.perf_counter()
        self._save_seconds = self._saved_at - started

    def _save_due(self) -> bool:
        """Whether dataset.json should be rewritten after a commit: always while that is cheap (a few hundred
        units), then at most once per ``1 / JSON_TIME_SHARE`` times the time a rewrite takes, so a run of
        thousands of units does not spend O(units^2) time rewriting it. Units committed in between are
        safe: each carries its marker, and the next writer (or :meth:`close`) records them."""
        if self._save_seconds < JSON_CHEAP_SECONDS:
            return True
        return time.perf_counter() - self._saved_at >= self._save_seconds / JSON_TIME_SHARE

    # ------------------------------------------------------------------ units
    def is_complete(self, task: str, run: int) -> bool:
        """Whether this unit is already in the dataset."""
        return layout.unit_key(task, run) in self._units

    def completed_units(self) -> set[tuple[str, int]]:
        return {(u["task"], int(u["run"])) for u in self._units.values()}

    def open_unit(self, task: str, run: int) -> "UnitWriter":
        """Start writing one unit; it stays invisible until :meth:`UnitWriter.commit`."""
        layout.check_task_name(task)
        key = layout.unit_key(task, run)
        if key in self._units:
            raise UserError(f"unit task={task} run={run} is already complete in {self.location}")
        if key in self._open:
            raise RuntimeError(f"unit {key} is already open")
        self._open.add(key)
        return UnitWriter(self, task, int(run))

    #: The same, read as ``with writer.unit(task, run) as unit:`` (commits on success, aborts on exception).
    unit = open_unit

    def _record(self, record: dict[str, Any]) -> None:
        key = layout.unit_key(record["task"], record["run"])
        self._units[key] = record
        self._open.discard(key)
        self._unsaved = True
        if not self.worker and self._save_due():
            self._save()

    def record_unit(self, record: dict[str, Any]) -> None:
        """Record a unit that a worker committed (the record its ``UnitWriter.commit`` returned)."""
        if self.worker:
            raise RuntimeError("a worker writer does not record units; the driver does")
        marker = self.location.join(layout.unit_dir(record["task"], record["run"]), layout.UNIT_MARKER)
        if not self.location.exists(marker):
            raise RuntimeError(f"unit task={record['task']} run={record['run']} is not in place ({marker} missing)")
        self._record(dict(record))

    def sync(self) -> None:
        """Rewrite dataset.json now, so that a reader opened next sees every unit committed so far."""
        if not self.worker:
            self._save()

    def close(self) -> None:
        """Write the final dataset.json (units still open are left unfinished) and release the dataset's lock;
        a worker writes nothing."""
        if not self.worker:
            try:
                self._save()
                self._remove_empty_staging()
            finally:
                self.release()

    def _remove_empty_staging(self) -> None:
        """Remove the empty ``.staging/task=*`` folders committed units leave behind (local datasets; a folder
        still in use is not empty and stays)."""
        base = self.location.local_path()
        staging = base and os.path.join(base, layout.STAGING)
        if not staging or not os.path.isdir(staging):
            return
        for name in os.listdir(staging):
            with contextlib.suppress(OSError):  # not empty (a unit in progress or left by a kill) or not a folder
                os.rmdir(os.path.join(staging, name))

    def release(self) -> None:
        """Let another process write this dataset (``close`` does this; also called when the writer is freed)."""
        lock, self._lock = getattr(self, "_lock", None), None
        if lock is not None:
            lock.release()

    def __del__(self) -> None:
        self.release()

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def file_metadata(self, task: str, run: int) -> dict[bytes, bytes]:
        """The ``ad.dataset`` header of one shard of unit (task, run): format, schema version, family, column
        spec, the metadata keys whose size does not grow with the number of tasks (:data:`SHARD_KEYS`), and this
        task's own entries (its split and its ``tasks`` record). Everything else (every task's split, the unit
        list) lives in ``dataset.json`` only, so a shard's size does not grow with the dataset's."""
        if self._task_split is None:
            split = self.metadata.get("split")
            lists = {k: v for k, v in split.items() if isinstance(v, list)} if isinstance(split, dict) else {}
            self._task_split = {str(t): name for name, names in lists.items() for t in names}
        header = {**self._header(SHARD_KEYS), "task": task, "run": int(run), "metadata": layout.DATASET_JSON}
        if task in self._task_split:
            header["split"] = self._task_split[task]
        tasks = self.metadata.get("tasks")
        if isinstance(tasks, dict) and task in tasks:
            header["task_info"] = tasks[task]
        return {SHARD_METADATA_KEY: json.dumps(header).encode()}
