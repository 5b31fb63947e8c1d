"""Write -> read round trips over every column kind."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ad.errors import SchemaError, UserError
from ad.history import ColumnSpec, HistoryReader, HistorySpec, HistoryWriter


def _core(n: int, streams: int, rng) -> dict:
    stream = np.repeat(np.arange(streams, dtype=np.int32), n // streams)
    t = np.tile(np.arange(n // streams), streams)
    return {"stream": stream, "update": (t // 7).astype(np.int64), "episode": (t // 5).astype(np.int32),
            "step": (t % 5).astype(np.int32), "reward": rng.random(n).astype(np.float32),
            "terminated": rng.random(n) < 0.1, "truncated": t % 5 == 4}


KINDS = {
    "discrete": (ColumnSpec.discrete(300), ColumnSpec.discrete(5), "scalar",
                 lambda n, rng: (rng.integers(0, 300, n), rng.integers(0, 5, n), rng.random(n).astype(np.float32))),
    "vector": (ColumnSpec.vector(3), ColumnSpec.discrete(2), "scalar",
               lambda n, rng: (rng.random((n, 3)).astype(np.float32), rng.integers(0, 2, n),
                               -rng.random(n).astype(np.float32))),
    "text": (ColumnSpec.text(), ColumnSpec.text(), "per_token",
             lambda n, rng: ([f"prompt {i} é" for i in range(n)], [f"completion {i}" for i in range(n)],
                             [rng.random(i % 4 + 1).astype(np.float32) for i in range(n)])),
    "tokens": (ColumnSpec.tokens(), ColumnSpec.tokens(), "per_token",
               lambda n, rng: ([list(range(i % 3 + 1)) for i in range(n)], [[i, i + 1] for i in range(n)],
                               [[-0.5] * (i % 2 + 1) for i in range(n)])),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("seed", [0, 1])
def test_roundtrip_every_column_kind(tmp_path, kind, seed):
    state_spec, action_spec, logprob_kind, make = KINDS[kind]
    spec = HistorySpec(state_spec, action_spec, logprob_kind, extra={"value": "float32"})
    rng = np.random.default_rng(seed)
    n, streams = 60, 3
    writer = HistoryWriter(tmp_path / "ds", spec, family="test", metadata={"note": kind}, shard_rows=25)
    batches = []
    with writer.unit("task-a", 0) as unit:
        for _ in range(2):
            cols = _core(n, streams, rng)
            cols["state"], cols["action"], cols["logprob"] = make(n, rng)
            cols["value"] = rng.random(n).astype(np.float32)
            unit.append(cols)
            batches.append(cols)
    writer.close()

    reader = HistoryReader(tmp_path / "ds")
    assert reader.metadata["note"] == kind and reader.spec == spec
    assert reader.units()[0]["rows"] == 2 * n
    got = {s.stream: s for s in reader.streams()}
    assert sorted(got) == list(range(streams))
    for sid in range(streams):
        for name in ("update", "episode", "step", "reward", "terminated", "state", "action", "logprob", "value"):
            expected = [v for b in batches for v, s in zip(_as_list(b[name]), b["stream"]) if s == sid]
            actual = _as_list(got[sid].columns[name])
            assert len(actual) == len(expected)
            for a, e in zip(actual, expected):
                np.testing.assert_allclose(np.asarray(a, dtype=float) if not isinstance(e, str) else 0,
                                           np.asarray(e, dtype=float) if not isinstance(e, str) else 0)
                if isinstance(e, str):
                    assert a == e
    table = reader.table()
    assert table.num_rows == 2 * n and table.column("task").type == pa.string()


def _as_list(values):
    if isinstance(values, np.ndarray) and values.ndim == 2:
        return list(values)
    return list(values)


def test_hf_datasets_reads_shards_as_written(synthetic_dataset):
    import datasets

    from ad.data import parquet_glob

    ds = datasets.load_dataset("parquet", data_files=parquet_glob(synthetic_dataset), split="train")
    reader = HistoryReader(synthetic_dataset)
    assert len(ds) == reader.num_transitions()
    assert set(ds.unique("task")) == set(reader.tasks())
    assert reader.to_hf_dataset().num_rows == len(ds)


def test_pyarrow_hive_discovery_reads_partitions(synthetic_dataset):
    import pyarrow.dataset as pds

    dataset = pds.dataset(synthetic_dataset, format="parquet", partitioning="hive", exclude_invalid_files=True)
    task = HistoryReader(synthetic_dataset).tasks()[0]
    table = dataset.to_table(filter=pds.field("task") == task)
    assert table.num_rows == 2 * 600


def test_stream_and_run_filters(synthetic_dataset):
    reader = HistoryReader(synthetic_dataset)
    task = reader.tasks()[1]
    picked = reader.streams(tasks=[task], streams=[1], columns=["step", "reward"])
    assert len(picked) == 1 and picked[0].task == task and picked[0].stream == 1
    assert set(picked[0].columns) == {"step", "reward", "stream"} or set(picked[0].columns) == {"step", "reward"}
    assert len(picked[0]) == 600
    # columns are contiguous arrays in time order
    steps = picked[0].columns["step"]
    assert steps.flags["C_CONTIGUOUS"] and list(steps[:21]) == list(range(20)) + [0]


@pytest.mark.parametrize("logprob_kind", ["scalar", "per_token"])
def test_rounded_logprob_bits(tmp_path, logprob_kind):
    """logprob_bits < 23 stores each logprob rounded to that many mantissa bits (relative error <= 2^-(bits+1)),
    keeps inf / NaN, records the precision in dataset.json and refuses to resume with another precision."""
    rng = np.random.default_rng(0)
    n, bits = 40, 8
    spec = HistorySpec(ColumnSpec.discrete(4), ColumnSpec.discrete(2), logprob_kind, logprob_bits=bits)
    cols = _core(n, 2, rng)
    cols["state"], cols["action"] = rng.integers(0, 4, n), rng.integers(0, 2, n)
    exact = (-rng.exponential(2.0, n)).astype(np.float32)
    exact[:3] = [-np.inf, np.nan, 0.0]
    cols["logprob"] = exact if logprob_kind == "scalar" else [[v, v / 3] for v in exact]
    writer = HistoryWriter(tmp_path / "ds", spec, family="test")
    with writer.unit("task-a", 0) as unit:
        unit.append(cols)
    writer.close()

    reader = HistoryReader(tmp_path / "ds")
    assert reader.spec == spec and reader.spec.logprob_bits == bits
    stored = np.concatenate([s.columns["logprob"] for s in reader.streams()])
    stored = stored if logprob_kind == "scalar" else np.array([v[0] for v in stored], np.float32)
    expected = np.concatenate([exact[cols["stream"] == s] for s in (0, 1)])
    assert np.isneginf(stored[np.isneginf(expected)]).all() and np.isnan(stored[np.isnan(expected)]).all()
    finite = np.isfinite(expected)
    np.testing.assert_allclose(stored[finite], expected[finite], rtol=2.0 ** -(bits + 1), atol=0)
    mantissa = stored[finite].view(np.uint32) & np.uint32((1 << (23 - bits)) - 1)
    assert not mantissa.any(), "dropped mantissa bits must be zero"
    assert (stored[finite] != expected[finite]).any(), "rounding must change some values"

    with pytest.raises(UserError, match="different settings"):
        HistoryWriter(tmp_path / "ds", HistorySpec(spec.state, spec.action, logprob_kind), family="test")
    with pytest.raises(SchemaError, match="logprob_bits"):
        HistorySpec(spec.state, spec.action, logprob_bits=24)


@pytest.mark.parametrize("row_group_rows", [None, 50])
def test_row_groups_within_shards_read_back_like_one_shard_per_unit(tmp_path, row_group_rows):
    import pyarrow.parquet as pq

    spec = HistorySpec(ColumnSpec.discrete(300), ColumnSpec.discrete(5), "scalar")
    rng = np.random.default_rng(3)
    batches = []
    for _ in range(5):
        cols = _core(60, 3, rng)  # each batch: 3 streams x 20 rows, stream-major
        cols["state"], cols["action"], cols["logprob"] = KINDS["discrete"][3](60, rng)
        batches.append(cols)
    paths = {}
    for name, kwargs in {"one": {}, "groups": {"shard_rows": 130, "row_group_rows": row_group_rows}}.items():
        writer = HistoryWriter(tmp_path / name, spec, family="test", **kwargs)
        with writer.unit("task-a", 0) as unit:
            for cols in batches:
                unit.append(cols)
        writer.close()
        paths[name] = tmp_path / name
    files = HistoryReader(paths["groups"]).units()[0]["files"]
    groups = [pq.ParquetFile(paths["groups"] / f).num_row_groups for f in files]
    # a shard closes once it holds >= 130 rows (180 here), the rest (120) at commit; with row_group_rows=50 each
    # 60-row batch is a row group, else a shard's rows are encoded at once
    assert groups == ([3, 2] if row_group_rows else [1, 1])
    expected = {s.stream: s.columns for s in HistoryReader(paths["one"]).streams()}
    got = {s.stream: s.columns for s in HistoryReader(paths["groups"]).streams()}
    assert sorted(got) == sorted(expected) == [0, 1, 2]
    for sid, columns in expected.items():
        for name, values in columns.items():
            np.testing.assert_array_equal(got[sid][name], values, err_msg=name)
