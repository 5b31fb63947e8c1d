"""Content hash of a dataset: equal iff the same transitions are stored (layout-independent)."""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ad.history.reader import HistoryReader


def content_hash(path: Any, filesystem: Any = None) -> str:
    """SHA-256 over every complete unit's streams, column by column, in (task, run, stream) order.

    Independent of shard boundaries and file encodings, so a resumed dataset hashes equal to
    an uninterrupted one exactly when no transition was lost, duplicated or changed.
    """
    reader = HistoryReader(path, filesystem)
    digest = hashlib.sha256()
    for unit in reader.units():
        for stream in sorted(reader.iter_unit_streams(unit), key=lambda s: s.stream):
            digest.update(f"{stream.task}|{stream.run}|{stream.stream}|{len(stream)}".encode())
            for name in sorted(stream.columns):
                values = stream.columns[name]
                if isinstance(values, np.ndarray) and values.dtype != object:
                    digest.update(name.encode() + np.ascontiguousarray(values).tobytes())
                else:
                    digest.update(name.encode() + repr([np.asarray(v).tolist() for v in values]).encode())
    return digest.hexdigest()
