"""Gymnasium spaces -> learning-history columns.

A :class:`gymnasium.spaces.Discrete` space is stored as a ``discrete`` column (integers ``0..n-1``; a space with a
``start`` is shifted to 0), a :class:`gymnasium.spaces.Box` as a fixed-size float32 ``vector`` column (the box
flattened). Other spaces are refused with a message that says what to do.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.errors import UserError
from ad.history import ColumnSpec


def column_for_space(space: Any, what: str) -> ColumnSpec:
    """The column that stores values of ``space`` (``what`` names it in errors: "observation" or "action")."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return ColumnSpec.discrete(int(space.n))
    if isinstance(space, spaces.Box):
        return ColumnSpec.vector(int(np.prod(space.shape)) if space.shape else 1)
    raise UserError(f"the {what} space {space} is not supported by the recorder; record Discrete or Box spaces "
                    "(flatten a Dict / Tuple space with gymnasium.wrappers.FlattenObservation first)")


def space_to_dict(space: Any) -> dict[str, Any]:
    """A JSON description of a Discrete or Box space (what a checkpoint is checked against)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": _bounds(space.low), "high": _bounds(space.high)}
    return {"type": type(space).__name__, "repr": str(space)}


def _bounds(values: np.ndarray) -> Any:
    """Box bounds as JSON: one number when every entry is equal, else a flat list (infinities as strings)."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    as_json = [v if np.isfinite(v) else ("inf" if v > 0 else "-inf") for v in flat.tolist()]
    return as_json[0] if len(set(as_json)) == 1 else as_json


def buffer_for(space: Any, rows: int) -> np.ndarray:
    """An empty buffer for ``rows`` values of ``space``: (rows,) float64 for Discrete (checked to be integers when
    flushed, so a stray fraction is refused rather than truncated), (rows, dim) float32 for Box."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return np.zeros(rows, np.float64)
    return np.zeros((rows, int(np.prod(space.shape)) if space.shape else 1), np.float32)


def from_space(values: np.ndarray, space: Any, what: str) -> np.ndarray:
    """Buffered values of ``space`` as the stored column: Discrete -> int64 from 0 (UserError for a value that is
    not one of the space's integers), Box -> as is."""
    from gymnasium import spaces

    if not isinstance(space, spaces.Discrete):
        return values
    ints = values.astype(np.int64)
    bad = np.flatnonzero((ints != values) | (ints < space.start) | (ints >= space.start + space.n))
    if bad.size:
        raise UserError(f"{what} {values[bad[0]]:g} is not a value of {space}")
    return ints - int(space.start)
