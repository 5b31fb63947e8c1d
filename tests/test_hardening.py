"""Issue #19: no bad value or fault may write bad data, leave a dataset unreadable, or end in a traceback.

One test per defect the issue lists; each goes through the real CLI (``ad.cli.main``) on real Parquet and
checks the exit code (2), that stderr is one ``error:`` line, and what is (not) on disk afterwards.
"""
from __future__ import annotations

import errno
import glob
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from ad.history import HistoryReader, Location, content_hash
from cli_run import run_cli

TINY = ["--size", "3", "--steps-per-goal", "2000", "--hidden", "16", "--progress", "false", "--plots", "false",
        "--tensorboard", "false"]




def generate(capsys, out: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "generate", "darkroom", "--out", str(out), *TINY, *extra)


def parquet_files(out: Path) -> list[str]:
    return glob.glob(f"{out}/**/*.parquet", recursive=True)


# ---------------------------------------------------------------------------- 1. non-finite values
@pytest.mark.parametrize("flag,value", [("--learning-rate", "inf"), ("--learning-rate", "nan"), ("--ent-coef", "nan"),
                                        ("--vf-coef", "inf"), ("--gamma", "-inf"), ("--adam-betas", "nan")])
def test_non_finite_option_is_refused_before_anything_is_written(tmp_path, capsys, flag, value):
    out = tmp_path / "d"
    extra = [flag, value, value] if flag == "--adam-betas" else [f"{flag}={value}"]
    code, err, _ = generate(capsys, out, *extra)
    assert code == 2 and flag in err and "finite" in err
    assert not out.exists()


def test_diverging_a2c_commits_nothing_and_the_corrected_command_replaces_the_failed_start(tmp_path, capsys):
    out = tmp_path / "d"
    code, err, _ = generate(capsys, out, "--goals", "0,0", "2,2", "--learning-rate", "1e30")
    assert code == 2 and "diverged" in err and "--learning-rate" in err
    assert HistoryReader(out).units() == [] and parquet_files(out) == []
    # 6. the dataset holds no committed unit, so the corrected command replaces its settings
    code, err, _ = generate(capsys, out, "--goals", "0,0", "2,2", "--learning-rate", "1e-3")
    assert code == 0, err
    reader = HistoryReader(out)
    assert len(reader.units()) == 2 and reader.metadata["source"]["config"]["learning_rate"] == 1e-3
    streams = reader.streams()
    assert all(np.isfinite(s.columns["logprob"]).all() and np.isfinite(s.columns["value"]).all() for s in streams)


def test_changed_settings_are_named_option_by_option(tmp_path, capsys):
    out = tmp_path / "d"
    assert generate(capsys, out, "--goals", "0,0")[0] == 0
    code, err, _ = generate(capsys, out, "--goals", "0,0", "--learning-rate", "0.002", "--ent-coef", "0.5")
    assert code == 2
    assert "--learning-rate (source.config.learning_rate): dataset 0.0001, this command 0.002" in err
    assert "--ent-coef" in err


# ---------------------------------------------------------------------------- 2. the corrupt-shard advice
def test_following_the_corrupt_shard_advice_loses_nothing(tmp_path, capsys):
    out = tmp_path / "d"
    assert generate(capsys, out, "--goals-per-batch", "2")[0] == 0
    before = content_hash(out)
    shard = sorted(parquet_files(out))[3]
    with open(shard, "r+b") as fh:
        fh.truncate(os.path.getsize(shard) // 2)
    code, err, _ = run_cli(capsys, "inspect", str(out))
    assert code == 2 and "delete its unit folder" in err
    unit_folder = err.split("delete its unit folder (")[1].split(")")[0]
    import shutil

    shutil.rmtree(out / unit_folder)  # the advice, followed to the letter
    assert generate(capsys, out, "--goals-per-batch", "2")[0] == 0
    assert content_hash(out) == before


def test_re_running_repairs_a_truncated_or_missing_shard_without_being_told(tmp_path, capsys):
    out = tmp_path / "d"
    assert generate(capsys, out)[0] == 0
    before = content_hash(out)
    shards = sorted(parquet_files(out))
    with open(shards[0], "r+b") as fh:
        fh.truncate(100)
    os.remove(shards[5])
    code, err, _ = generate(capsys, out)
    assert code == 0 and err.count("repairing") == 2
    assert content_hash(out) == before


# ---------------------------------------------------------------------------- 3. readers while writing
def test_files_being_written_never_match_the_documented_glob(tmp_path):
    import duckdb
    import polars as pl

    from ad.history import ColumnSpec, HistorySpec, HistoryWriter

    spec = HistorySpec(state=ColumnSpec.discrete(4), action=ColumnSpec.discrete(2))
    writer = HistoryWriter(tmp_path / "d", spec, family="test", shard_rows=50)
    rows = {"stream": np.zeros(120, np.int32), "update": np.zeros(120, np.int64), "episode": np.zeros(120, np.int32),
            "step": np.arange(120, dtype=np.int32), "state": np.zeros(120, np.int64),
            "action": np.ones(120, np.int64), "reward": np.zeros(120, np.float32),
            "terminated": np.zeros(120, bool), "truncated": np.zeros(120, bool), "logprob": np.zeros(120, np.float32)}
    with writer.unit("done", 0) as unit:
        unit.append(rows)
    open_unit = writer.open_unit("busy", 0)
    open_unit.append(rows)  # two shards closed and one open, all in the staging folder
    assert glob.glob(f"{tmp_path}/d/.staging/**/*", recursive=True)
    pattern = f"{tmp_path}/d/**/*.parquet"
    assert all("/.staging/" not in f for f in glob.glob(pattern, recursive=True))
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning=true)").fetchall()[0][0] == 120
    assert pl.scan_parquet(pattern, hive_partitioning=True).select(pl.len()).collect().item() == 120
    open_unit.commit()
    writer.close()
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning=true)").fetchall()[0][0] == 240


def test_a_unit_moved_into_place_but_not_renamed_is_adopted_whole(tmp_path):
    """A crash between moving a unit folder and naming its shards: the next writer finishes the renames."""
    from ad.history import ColumnSpec, HistorySpec, HistoryWriter, layout

    spec = HistorySpec(state=ColumnSpec.discrete(4), action=ColumnSpec.discrete(2))
    writer = HistoryWriter(tmp_path / "d", spec, family="test")
    unit = writer.open_unit("t", 0)
    unit.append({"stream": np.zeros(5, np.int32), "update": np.zeros(5, np.int64), "episode": np.zeros(5, np.int32),
                 "step": np.arange(5, dtype=np.int32), "state": np.zeros(5, np.int64), "action": np.zeros(5, np.int64),
                 "reward": np.zeros(5, np.float32), "terminated": np.zeros(5, bool), "truncated": np.zeros(5, bool),
                 "logprob": np.zeros(5, np.float32)})
    unit.commit()
    final = tmp_path / "d" / "task=t" / "run=0"
    os.rename(final / "part-00000.parquet", final / f"part-00000.parquet{layout.PARTIAL_SUFFIX}")
    (tmp_path / "d" / "dataset.json").write_text(
        json.dumps({**json.loads((tmp_path / "d" / "dataset.json").read_text()), "units": {}}))
    writer.release()
    HistoryWriter(tmp_path / "d", spec, family="test").close()
    assert (final / "part-00000.parquet").is_file() and HistoryReader(tmp_path / "d").num_transitions() == 5


# ---------------------------------------------------------------------------- 5. tracebacks -> one error line
def test_out_naming_an_existing_file_is_refused_by_every_command(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    assert generate(capsys, afile)[0] == 2
    data = tmp_path / "d"
    assert generate(capsys, data, "--goals", "0,0")[0] == 0
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(data), "--out", str(afile), "--max-steps", "1")
    assert code == 2 and "is a file" in err
    code, err, _ = run_cli(capsys, "eval", "--data", str(data), "--ckpt", str(tmp_path / "nothing"), "--out", str(afile))
    assert code == 2 and "is a file" in err
    assert afile.read_text() == "keep me"


class _RefusingHandler(pafs.FSSpecHandler):
    """A local file system that refuses to write files whose name contains ``refuse`` with OSError(``code``)."""

    def __init__(self, code: int, refuse: str) -> None:
        import fsspec

        super().__init__(fsspec.filesystem("file"))
        self.code, self.refuse = code, refuse

    def open_output_stream(self, path, metadata):
        if self.refuse in path:
            raise OSError(self.code, os.strerror(self.code), path)
        return super().open_output_stream(path, metadata)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("refused", ["dataset.json", ".partial"])
def test_full_disk_or_read_only_output_is_one_error_line_and_loses_nothing(tmp_path, capsys, monkeypatch, code,
                                                                            refused):
    monkeypatch.chdir(tmp_path)  # the wrapped file system counts as remote: its run folder goes under ./runs
    out = tmp_path / "d"
    argv = ["--goals", "0,0", "2,2", "--goals-per-batch", "1"]
    assert generate(capsys, out, *argv)[0] == 0
    reference = content_hash(out)
    import shutil

    shutil.rmtree(out / "task=darkroom3-g2-2")  # one unit to regenerate: shards and dataset.json get written
    before = (out / "dataset.json").read_text()
    real_of = Location.of

    def refusing(path, filesystem=None):
        loc = real_of(path, filesystem)
        if loc.local_path() is None:
            return loc
        return Location(pafs.PyFileSystem(_RefusingHandler(code, refused)), loc.base)

    monkeypatch.setattr(Location, "of", staticmethod(refusing))
    code_, err, _ = generate(capsys, out, *argv)
    assert code_ == 2 and os.strerror(code) in err
    assert not glob.glob(f"{out}/**/*.tmp-*", recursive=True) and not glob.glob(f"{out}/.staging/task=*/run=*/*")
    if refused == "dataset.json":
        assert (out / "dataset.json").read_text() == before
    monkeypatch.undo()
    assert generate(capsys, out, *argv)[0] == 0  # once there is room again, the same command completes it
    assert content_hash(out) == reference


def test_a_second_writer_of_one_dataset_is_told_to_wait(tmp_path, capsys):
    out = tmp_path / "d"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from ad.history.lock import DatasetLock
        from ad.history import Location
        lock = DatasetLock.acquire(Location.of({str(out)!r}))
        print("locked", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, err, _ = generate(capsys, out, "--goals", "0,0")
        assert code == 2 and f"pid {holder.pid}" in err and "is writing" in err
    finally:
        holder.kill()
        holder.wait()
    assert generate(capsys, out, "--goals", "0,0")[0] == 0  # the lock died with its process


@pytest.mark.parametrize("content,expected", [
    ("{not json", "is corrupt"),
    ('["a list"]', "not a learning-history dataset"),
    (None, "units['darkroom3-g0-0|0'].rows must be a JSON int"),
])
def test_invalid_or_wrongly_typed_dataset_json_is_named(tmp_path, capsys, content, expected):
    out = tmp_path / "d"
    assert generate(capsys, out, "--goals", "0,0")[0] == 0
    if content is None:
        meta = json.loads((out / "dataset.json").read_text())
        meta["units"]["darkroom3-g0-0|0"]["rows"] = "many"
        content = json.dumps(meta)
    (out / "dataset.json").write_text(content)
    for argv in (["inspect", str(out)], ["generate", "darkroom", "--out", str(out), *TINY, "--goals", "0,0"]):
        code, err, _ = run_cli(capsys, *argv)
        assert code == 2 and expected in err and "dataset.json" in err


def test_actions_out_of_range_in_a_shard_are_named_before_training(tmp_path, capsys):
    from benchmarks.helpers.synthetic_goals import write_synthetic_dataset

    data = write_synthetic_dataset(tmp_path / "syn", num_tasks=2, length=100)
    shard = sorted(parquet_files(data))[0]
    table = pq.read_table(shard)
    actions = table.column("action").to_numpy().copy()
    actions[7] = 9
    import pyarrow as pa

    table = table.set_column(table.schema.get_field_index("action"), table.schema.field("action"),
                             pa.array(actions, type=table.schema.field("action").type))
    pq.write_table(table, shard)
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(data), "--out", str(tmp_path / "run"), "--max-steps", "1",
                        "--progress", "false")
    assert code == 2 and "column 'action' holds 9" in err and "part-" in err


@pytest.mark.parametrize("argv,expected", [
    (["--size", "100000"], "too large"),
    (["--size", "32", "--hidden", "1000000"], "GiB of memory"),
])
def test_absurd_sizes_are_refused_up_front(tmp_path, capsys, argv, expected):
    code, err, _ = generate(capsys, tmp_path / "d", *argv)
    assert code == 2 and expected in err and not (tmp_path / "d").exists()


@pytest.mark.parametrize("command,text,flag", [
    (["generate", "darkroom"], "size: nine\n", "--size"),
    (["generate", "darkroom"], "size: 9.7\n", "--size"),
    (["generate", "darkroom"], "size: true\n", "--size"),
    (["generate", "darkroom"], "learning_rate: .nan\n", "--learning-rate"),
    (["train", "rl"], "max_steps: 1.5\n", "--max-steps"),
    (["train", "rl"], "learning_rate: [1, 2]\n", "--learning-rate"),
    (["eval"], "episodes: ten\n", "--episodes"),
])
def test_config_file_values_of_the_wrong_type_name_the_option(tmp_path, capsys, command, text, flag):
    config = tmp_path / "options.yaml"
    config.write_text(text)
    code, err, _ = run_cli(capsys, *command, "--config", str(config), "--out", str(tmp_path / "o"))
    assert code == 2 and flag in err and str(config) in err
    assert not (tmp_path / "o").exists()


def test_config_file_numbers_as_yaml_strings_still_work(tmp_path, capsys):
    config = tmp_path / "options.yaml"
    config.write_text("learning_rate: 1e-3\nsize: 5\n")  # YAML 1.1 reads 1e-3 as a string
    code, _, printed = run_cli(capsys, "generate", "darkroom", "--config", str(config), "--print-config")
    assert code == 0 and "learning_rate: 0.001" in printed and "size: 5" in printed


# ---------------------------------------------------------------------------- 7. smaller defects
def test_train_out_inside_a_dataset_folder_is_refused(tmp_path, capsys):
    data = tmp_path / "d"
    assert generate(capsys, data, "--goals", "0,0")[0] == 0
    listing = sorted(os.listdir(data))
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(data), "--out", str(data), "--max-steps", "1")
    assert code == 2 and "is a learning-history dataset" in err
    assert sorted(os.listdir(data)) == listing


def test_a_corrupt_checkpoint_config_is_reported_as_corrupt(tmp_path, capsys):
    data = tmp_path / "d"
    assert generate(capsys, data, "--goals", "0,0", "2,2", "0,2", "2,0")[0] == 0
    ckpt = tmp_path / "run" / "model"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text('{"model_type": "ad-rl", ')
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(tmp_path / "run"), "--data", str(data), "--split", "train")
    assert code == 2 and "is corrupt" in err and "config.json" in err


def test_goal_on_the_start_cell_and_max_tasks_zero_are_refused(tmp_path, capsys):
    code, err, _ = generate(capsys, tmp_path / "d", "--goals", "1,1")
    assert code == 2 and "start cell" in err
    assert generate(capsys, tmp_path / "d", "--goals", "1,1", "--random-start")[0] == 0
    code, err, _ = run_cli(capsys, "eval", "--data", str(tmp_path / "d"), "--max-tasks", "0")
    assert code == 2 and "--max-tasks must be positive" in err


def test_resume_help_says_it_is_not_bit_identical(capsys):
    for command in (["train", "rl"], ["train", "lm"]):
        code, _, printed = run_cli(capsys, *command, "--help")
        assert code == 0 and "not bit-identical" in " ".join(printed.split())
