"""Names of things inside a dataset folder (one place, so writer and reader agree).

    <root>/dataset.json                        metadata + list of complete units (written last)
    <root>/task=<task>/run=<run>/part-00000.parquet   Hive-partitioned shards of complete units
    <root>/.staging/task=<task>/run=<run>/part-00000.parquet.partial   units being written
    <root>/.lock                               held by the process writing the dataset (local datasets)

Files being written never end in ``.parquet`` (they carry :data:`PARTIAL_SUFFIX` until the unit commits), so
the documented globs (``<root>/**/*.parquet`` in DuckDB and polars) never match an incomplete file, even
though those globs descend into the hidden staging folder.
"""
from __future__ import annotations

import re

DATASET_JSON = "dataset.json"
STAGING = ".staging"
UNIT_MARKER = ".unit.json"
LOCK = ".lock"
PARTIAL_SUFFIX = ".partial"  # a shard's name while it is written or waiting for its unit to commit
FORMAT_NAME = "ad-learning-history"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def check_task_name(task: str) -> str:
    """Task names name partition folders, so they must be path-safe."""
    from ad.errors import UserError

    if not isinstance(task, str) or not _SAFE.match(task) or task in (".", ".."):
        raise UserError(f"task name {task!r} is not path-safe; use letters, digits and _ . + - only")
    return task


def unit_dir(task: str, run: int) -> str:
    return f"task={task}/run={int(run)}"


def unit_key(task: str, run: int) -> str:
    return f"{task}|{int(run)}"
