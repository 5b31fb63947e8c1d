"""Bad input gives one clear error naming the file / column / value; nothing written is damaged."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ad.errors import SchemaError, UserError
from ad.history import ColumnSpec, HistoryReader, HistorySpec, HistoryWriter, content_hash
from benchmarks.helpers.synthetic import SPEC, synthetic_columns


def _first_shard(path):
    reader = HistoryReader(path)
    return path / reader.units()[0]["files"][0]


def test_missing_shard(synthetic_dataset):
    shard = _first_shard(synthetic_dataset)
    shard.unlink()
    with pytest.raises(SchemaError, match=f"shard .*{shard.name} is missing"):
        HistoryReader(synthetic_dataset).streams()


def test_corrupt_shard(synthetic_dataset):
    shard = _first_shard(synthetic_dataset)
    shard.write_bytes(b"not parquet at all")
    with pytest.raises(SchemaError, match="corrupt or not Parquet"):
        HistoryReader(synthetic_dataset).streams()


def test_wrong_column_type(synthetic_dataset):
    shard = _first_shard(synthetic_dataset)
    table = pq.read_table(shard)
    table = table.set_column(table.column_names.index("reward"), "reward", table.column("reward").cast(pa.string()))
    pq.write_table(table, shard)
    with pytest.raises(SchemaError, match="column 'reward' has type string, expected float"):
        HistoryReader(synthetic_dataset).table()


def test_other_schema_version(synthetic_dataset):
    meta_path = synthetic_dataset / "dataset.json"
    meta = json.loads(meta_path.read_text())
    meta["schema_version"] = 99
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(SchemaError, match="schema_version 99"):
        HistoryReader(synthetic_dataset)


def test_empty_dataset(tmp_path):
    HistoryWriter(tmp_path / "empty", SPEC, family="synthetic").close()
    with pytest.raises(UserError, match="holds no complete units"):
        HistoryReader(tmp_path / "empty").streams()


def test_not_a_dataset(tmp_path):
    with pytest.raises(UserError, match="no dataset.json"):
        HistoryReader(tmp_path)


def test_bad_column_values_name_column_and_value(tmp_path):
    writer = HistoryWriter(tmp_path / "ds", SPEC, family="synthetic")
    cols = synthetic_columns(np.random.default_rng(0), 1, 40, goal=(0, 0))
    cols["action"] = cols["action"].copy()
    cols["action"][3] = 7
    with pytest.raises(SchemaError, match="'action' has value 7 outside 0..4"), writer.unit("t", 0) as unit:
        unit.append(cols)
    cols = synthetic_columns(np.random.default_rng(0), 1, 40, goal=(0, 0))
    cols["reward"] = np.array(["x"] * 40)
    unit = writer.open_unit("t", 0)
    with pytest.raises(SchemaError, match="'reward' must be numeric"):
        unit.append(cols)
    del cols["reward"]
    with pytest.raises(SchemaError, match="missing"):
        unit.append(cols)


def test_other_family_or_settings_refused_and_untouched(synthetic_dataset):
    before = content_hash(synthetic_dataset)
    with pytest.raises(UserError, match="holds a 'synthetic' dataset, not 'darkroom'"):
        HistoryWriter(synthetic_dataset, SPEC, family="darkroom")
    meta = HistoryReader(synthetic_dataset).metadata
    changed = {k: meta[k] for k in ("task_spec", "source", "seeds", "split", "tasks")}
    changed["seeds"] = [123]
    with pytest.raises(UserError, match=r"different settings: seeds: dataset \[1\], this command \[123\]"):
        HistoryWriter(synthetic_dataset, SPEC, family="synthetic", metadata=changed)
    assert content_hash(synthetic_dataset) == before


def test_foreign_folder_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    spec = HistorySpec(ColumnSpec.discrete(3), ColumnSpec.discrete(2))
    with pytest.raises(UserError, match="not empty"):
        HistoryWriter(tmp_path, spec, family="x")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_cli_user_error_exits_2_without_traceback(synthetic_dataset, tmp_path):
    shard = _first_shard(synthetic_dataset)
    shard.write_bytes(b"garbage")
    for args in (["inspect", str(synthetic_dataset)], ["inspect", str(tmp_path / "nothing")],
                 ["inspect", str(synthetic_dataset), "--fraction", "2"], ["nosuchcommand"]):
        proc = subprocess.run([sys.executable, "-m", "ad", *args], capture_output=True, text=True)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.startswith("error:"), proc.stderr


def test_cli_inspect_table_and_plot(synthetic_dataset, tmp_path):
    png = tmp_path / "curves.png"
    proc = subprocess.run([sys.executable, "-m", "ad", "inspect", str(synthetic_dataset), "--plot", str(png)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for task in HistoryReader(synthetic_dataset).tasks():
        assert task in proc.stdout
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
