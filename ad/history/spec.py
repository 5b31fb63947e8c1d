"""The learning-history schema: which columns a dataset has and their Arrow types.

A :class:`HistorySpec` says how a task encodes states, actions and logprobs
(the design page, docs/design.md: "The learning-history store"). It turns into the Arrow schema of
every shard and validates each column batch before it is written.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ad.errors import SchemaError

SCHEMA_VERSION = 1
#: Explicit mantissa bits of a float32 (``HistorySpec.logprob_bits`` at full precision).
FLOAT32_MANTISSA_BITS = 23

#: Core columns every task writes, except state / action / logprob (typed by the spec).
CORE_TYPES: dict[str, pa.DataType] = {
    "task": pa.string(),  # dictionary-encoded inside Parquet; plain string in Arrow so Hive discovery merges
    "run": pa.int32(),
    "stream": pa.int32(),
    "update": pa.int64(),
    "episode": pa.int32(),
    "step": pa.int32(),
    "reward": pa.float32(),
    "terminated": pa.bool_(),
    "truncated": pa.bool_(),
}
#: Order of the columns in every shard.
CORE_ORDER = ("task", "run", "stream", "update", "episode", "step", "state", "action", "reward",
              "terminated", "truncated", "logprob")

_EXTRA_TYPES = {
    "float32": pa.float32(), "float64": pa.float64(), "int32": pa.int32(), "int64": pa.int64(),
    "bool": pa.bool_(), "string": pa.string(), "list<float32>": pa.list_(pa.float32()),
    "list<int32>": pa.list_(pa.int32()),
}


@dataclass(frozen=True)
class ColumnSpec:
    """How one of state / action is stored.

    kind: "discrete" (int in [0, n)), "vector" (fixed-size float32 list of length dim),
    "text" (string) or "tokens" (variable-length list of int32 token ids).
    """

    kind: str
    n: int | None = None  #: number of values, for discrete
    dim: int | None = None  #: vector length, for vector

    @staticmethod
    def discrete(n: int) -> "ColumnSpec":
        """Integers 0..n-1, stored in the smallest integer type that holds them."""
        return ColumnSpec("discrete", n=int(n))

    @staticmethod
    def vector(dim: int) -> "ColumnSpec":
        """Fixed-size float32 vectors."""
        return ColumnSpec("vector", dim=int(dim))

    @staticmethod
    def text() -> "ColumnSpec":
        """Strings (prompts, completions, state descriptions)."""
        return ColumnSpec("text")

    @staticmethod
    def tokens() -> "ColumnSpec":
        """Variable-length lists of int32 token ids."""
        return ColumnSpec("tokens")

    def arrow_type(self) -> pa.DataType:
        """The Arrow type of this column in the shards."""
        if self.kind == "discrete":  # the smallest integer type that holds 0..n-1
            return pa.int8() if self.n <= 2**7 else pa.int16() if self.n <= 2**15 else pa.int32()  # type: ignore
        if self.kind == "vector":
            return pa.list_(pa.float32(), self.dim)
        if self.kind in ("text", "tokens"):
            return pa.string() if self.kind == "text" else pa.list_(pa.int32())
        raise SchemaError(f"unknown column kind {self.kind!r}; use discrete, vector, text or tokens")

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("kind", self.kind), ("n", self.n), ("dim", self.dim)) if v is not None}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "ColumnSpec":
        return ColumnSpec(data["kind"], n=data.get("n"), dim=data.get("dim"))


@dataclass(frozen=True)
class HistorySpec:
    """Column layout of one learning-history dataset."""

    state: ColumnSpec
    action: ColumnSpec
    logprob: str = "scalar"  #: "scalar" (float32 per transition) or "per_token" (list<float32>)
    extra: dict[str, str] = field(default_factory=dict)  #: extra column name -> type name (see _EXTRA_TYPES)
    #: mantissa bits kept in stored logprobs: 23 = exact float32 (default); fewer rounds each value to the nearest
    #: float with that many bits (7 = bfloat16 precision, 10 = float16), which Parquet compresses much better
    logprob_bits: int = FLOAT32_MANTISSA_BITS

    def __post_init__(self) -> None:
        if self.logprob not in ("scalar", "per_token"):
            raise SchemaError(f"logprob must be 'scalar' or 'per_token', got {self.logprob!r}")
        if not 1 <= self.logprob_bits <= FLOAT32_MANTISSA_BITS:
            raise SchemaError(f"logprob_bits must be in 1..{FLOAT32_MANTISSA_BITS} (mantissa bits kept), "
                              f"got {self.logprob_bits}")
        for name, type_name in self.extra.items():
            if name in CORE_ORDER:
                raise SchemaError(f"extra column {name!r} clashes with a core column")
            if type_name not in _EXTRA_TYPES:
                raise SchemaError(f"extra column {name!r} has unknown type {type_name!r}; "
                                  f"use one of {', '.join(_EXTRA_TYPES)}")

    def column_types(self) -> dict[str, pa.DataType]:
        """Every column's Arrow type, in storage order."""
        types = {**CORE_TYPES, "state": self.state.arrow_type(), "action": self.action.arrow_type(),
                 "logprob": pa.float32() if self.logprob == "scalar" else pa.list_(pa.float32())}
        return {**{name: types[name] for name in CORE_ORDER}, **{n: _EXTRA_TYPES[t] for n, t in self.extra.items()}}

    def arrow_schema(self, metadata: dict[bytes, bytes] | None = None) -> pa.Schema:
        """The Arrow schema every shard of this dataset has."""
        return pa.schema([pa.field(n, t, nullable=False) for n, t in self.column_types().items()],
                         metadata=metadata)

    def to_dict(self) -> dict[str, Any]:
        data = {"state": self.state.to_dict(), "action": self.action.to_dict(),
                "logprob": self.logprob, "extra": dict(self.extra)}
        if self.logprob_bits != FLOAT32_MANTISSA_BITS:  # exact datasets keep the original dataset.json form
            data["logprob_bits"] = self.logprob_bits
        return data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "HistorySpec":
        return HistorySpec(ColumnSpec.from_dict(data["state"]), ColumnSpec.from_dict(data["action"]),
                           data.get("logprob", "scalar"), dict(data.get("extra", {})),
                           int(data.get("logprob_bits", FLOAT32_MANTISSA_BITS)))

    # ------------------------------------------------------------------ validation
    def to_arrays(self, columns: dict[str, Any], where: str) -> dict[str, pa.Array]:
        """Validate one column batch (task/run excluded) and convert it to Arrow arrays.

        Raises SchemaError naming the column and value when something does not fit.
        """
        types = self.column_types()
        expected = [n for n in types if n not in ("task", "run")]
        missing = [n for n in expected if n not in columns]
        unknown = [n for n in columns if n not in types]
        if missing or unknown:
            raise SchemaError(f"{where}: column batch is missing {missing or 'nothing'} and has unknown "
                              f"{unknown or 'nothing'}; a batch needs exactly {expected}")
        lengths = {n: len(columns[n]) for n in expected}
        if len(set(lengths.values())) != 1:
            raise SchemaError(f"{where}: columns have different lengths {lengths}")
        arrays = {name: _to_arrow(name, columns[name], types[name], where, self) for name in expected}
        if self.logprob_bits < FLOAT32_MANTISSA_BITS:
            arrays["logprob"] = _round_logprob(arrays["logprob"], self.logprob_bits)
        return arrays


def round_mantissa(values: np.ndarray, bits: int) -> np.ndarray:
    """float32 ``values`` rounded to the nearest float with ``bits`` mantissa bits (ties away from zero).

    The relative error is at most ``2 ** -(bits + 1)``; infinities and NaNs are kept as they are.
    """
    values = np.ascontiguousarray(values, dtype=np.float32)
    drop = FLOAT32_MANTISSA_BITS - bits
    if drop <= 0:
        return values
    raw = values.view(np.uint32)  # sign | exponent | mantissa; adding half an ulp carries into the exponent
    rounded = ((raw + np.uint32(1 << (drop - 1))) & np.uint32(~((1 << drop) - 1) & 0xFFFFFFFF)).view(np.float32)
    return np.where(np.isfinite(values), rounded, values)


def _round_logprob(array: pa.Array, bits: int) -> pa.Array:
    """A logprob column (float32 or list<float32>) with every value rounded to ``bits`` mantissa bits."""
    if pa.types.is_list(array.type):
        offsets = array.offsets.to_numpy() - array.offsets[0].as_py()  # (n + 1,) from 0 even for a slice
        flat = round_mantissa(array.flatten().to_numpy(zero_copy_only=False), bits)
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.float32()))
    return pa.array(round_mantissa(array.to_numpy(zero_copy_only=False), bits), pa.float32())


#: numpy dtype of each integer / float / bool column type (pyarrow's to_pandas_dtype would import pandas)
_NUMPY_TYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
                pa.float32(): np.float32, pa.float64(): np.float64, pa.bool_(): np.bool_}


def numpy_to_arrow(arr: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """A 1-D numpy array of ``arrow_type``'s numpy type (bool, integer or float) as a pyarrow array, from its buffer:
    ``pa.array`` imports pandas at its first call in a process (about a second) where pandas is installed."""
    data = np.packbits(arr, bitorder="little") if pa.types.is_boolean(arrow_type) else np.ascontiguousarray(arr)
    return pa.Array.from_buffers(arrow_type, len(arr), [None, pa.py_buffer(data)])


def repeated_string(value: str, n: int) -> pa.Array:
    """``value`` n times as a pyarrow string array (``pa.scalar`` imports pandas at its first call too)."""
    data = value.encode()
    if n * len(data) >= 2**31:
        return pa.repeat(pa.scalar(value), n)
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(data))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def arrow_to_numpy(arr: pa.Array) -> np.ndarray:
    """An integer or float pyarrow array without nulls as a numpy view of its buffer (``to_numpy`` also imports
    pandas at its first call)."""
    dtype = np.dtype(_NUMPY_TYPES[arr.type])
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def _to_arrow(name: str, values: Any, arrow_type: pa.DataType, where: str, spec: HistorySpec) -> pa.Array:
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type):
        arr = np.asarray(values)
        if arr.ndim != 1:
            raise SchemaError(f"{where}: column {name!r} must be 1-D, got shape {arr.shape}")
        if pa.types.is_boolean(arrow_type):
            if arr.dtype != np.bool_:
                raise SchemaError(f"{where}: column {name!r} must be bool, got {arr.dtype}")
        elif pa.types.is_integer(arrow_type):
            if arr.dtype.kind not in "iu":
                raise SchemaError(f"{where}: column {name!r} must hold integers, got {arr.dtype}")
            column_spec = spec.state if name == "state" else spec.action if name == "action" else None
            if column_spec is not None and arr.size:
                lo, hi = int(arr.min()), int(arr.max())
                if lo < 0 or hi >= column_spec.n:  # type: ignore[operator]
                    bad = lo if lo < 0 else hi
                    raise SchemaError(f"{where}: column {name!r} has value {bad} outside 0..{column_spec.n - 1}")
        elif arr.dtype.kind not in "fiu":
            raise SchemaError(f"{where}: column {name!r} must be numeric, got {arr.dtype}")
        return numpy_to_arrow(arr.astype(_NUMPY_TYPES[arrow_type], copy=False), arrow_type)
    if pa.types.is_fixed_size_list(arrow_type):
        arr = np.asarray(values, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] != arrow_type.list_size:
            raise SchemaError(f"{where}: column {name!r} must have shape (n, {arrow_type.list_size}), got {arr.shape}")
        return pa.FixedSizeListArray.from_arrays(numpy_to_arrow(arr.reshape(-1), pa.float32()), arrow_type.list_size)
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as err:
        raise SchemaError(f"{where}: column {name!r} cannot be stored as {arrow_type}: {err}") from None
