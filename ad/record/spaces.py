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


def to_column(values: Any, space: Any, batch: int, what: str) -> np.ndarray:
    """``batch`` values of ``space`` as the column's array: (batch,) int64 for Discrete, (batch, dim) float32
    for Box. Raises UserError for values of another shape or non-finite numbers."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        arr = np.asarray(values).reshape(-1)
        if arr.size != batch or arr.dtype.kind not in "iu":
            raise UserError(f"{what} must be {batch} integer(s) of {space}, got {np.asarray(values)!r}")
        return arr.astype(np.int64) - int(space.start)
    dim = int(np.prod(space.shape)) if space.shape else 1
    arr = np.asarray(values, dtype=np.float32).reshape(batch, -1) if np.size(values) == batch * dim else None
    if arr is None:
        raise UserError(f"{what} must hold {batch} value(s) of shape {space.shape}, got shape {np.shape(values)}")
    if not np.isfinite(arr).all():
        raise UserError(f"{what} holds a non-finite number ({arr[~np.isfinite(arr)][0]}); the recorder stores "
                        "finite values only: check the environment or the policy")
    return arr
