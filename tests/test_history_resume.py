"""Interrupted writing (exception, SIGKILL) then resume gives exactly the uninterrupted dataset."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from ad.history import HistoryReader, HistoryWriter, content_hash
from benchmarks.helpers.synthetic import SPEC, synthetic_columns

TASKS = [f"t{i}" for i in range(4)]


def _write(path, fail_at: str | None = None, pause: float = 0.0):
    """Write 4 units of 3 batches each, deterministic per unit; optionally raise inside one."""
    writer = HistoryWriter(path, SPEC, family="synthetic", metadata={"tasks": TASKS}, shard_rows=300)
    for i, task in enumerate(TASKS):
        if writer.is_complete(task, 0):
            continue
        rng = np.random.default_rng(i)
        with writer.unit(task, 0) as unit:
            for b in range(3):
                cols = synthetic_columns(rng, 2, 200, goal=(1, 2))
                cols["update"] = cols["update"] + 10 * b
                unit.append(cols)
                if pause:
                    time.sleep(pause)
                if task == fail_at and b == 1:
                    raise RuntimeError("boom")
    writer.close()


def test_exception_mid_unit_then_resume(tmp_path):
    _write(tmp_path / "full")
    with pytest.raises(RuntimeError):
        _write(tmp_path / "broken", fail_at="t2")
    partial = HistoryReader(tmp_path / "broken")
    assert [u["task"] for u in partial.units()] == ["t0", "t1"]  # reads cleanly, complete units only
    assert partial.num_transitions() == 2 * 3 * 400
    _write(tmp_path / "broken")
    assert content_hash(tmp_path / "broken") == content_hash(tmp_path / "full")
    assert HistoryReader(tmp_path / "broken").num_transitions() == 4 * 3 * 400


def test_exception_mid_unit_records_units_whose_dataset_json_save_was_deferred(tmp_path, monkeypatch):
    """On a loaded machine dataset.json rewrites are deferred after commits; a unit that then fails still leaves
    dataset.json listing every unit committed before it."""
    import ad.history.writer as writer_module
    monkeypatch.setattr(writer_module, "JSON_CHEAP_SECONDS", -1.0)  # every rewrite counts as expensive
    monkeypatch.setattr(writer_module, "JSON_TIME_SHARE", 1e-9)  # so none is due after a commit
    with pytest.raises(RuntimeError):
        _write(tmp_path / "broken", fail_at="t2")
    assert [u["task"] for u in HistoryReader(tmp_path / "broken").units()] == ["t0", "t1"]


def test_sigkill_mid_run_then_resume(tmp_path):
    _write(tmp_path / "full")
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_history_resume import _write
        _write({str(tmp_path / 'killed')!r}, pause=0.15)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    # kill once at least one unit is complete and another is in progress
    while time.time() < deadline:
        if (tmp_path / "killed" / "dataset.json").exists():
            try:
                if len(HistoryReader(tmp_path / "killed").units()) >= 1:
                    break
            except Exception:  # noqa: BLE001 - file being replaced
                pass
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = HistoryReader(tmp_path / "killed").units()
    assert 1 <= len(done) < 4
    _write(tmp_path / "killed")
    assert content_hash(tmp_path / "killed") == content_hash(tmp_path / "full")


def test_crash_between_rename_and_dataset_json_is_adopted(tmp_path, monkeypatch):
    """A unit moved into place whose dataset.json update never happened is recovered, not lost."""
    path = tmp_path / "ds"
    writer = HistoryWriter(path, SPEC, family="synthetic", metadata={})
    unit = writer.open_unit("t0", 0)
    unit.append(synthetic_columns(np.random.default_rng(0), 2, 100, goal=(0, 0)))
    monkeypatch.setattr(writer, "_save_due", lambda: True)  # a loaded machine may otherwise defer the rewrite
    monkeypatch.setattr(writer, "_save", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        unit.commit()
    assert HistoryReader(path).units() == []
    resumed = HistoryWriter(path, SPEC, family="synthetic", metadata={})
    assert resumed.is_complete("t0", 0)
    assert HistoryReader(path).num_transitions() == 200


def test_dataset_json_rewrites_are_throttled_but_nothing_is_lost(tmp_path, monkeypatch):
    """Past a few units, dataset.json is not rewritten after every commit (O(units^2) for big runs); the units
    in between are recorded by sync(), by close(), or adopted from their markers by the next writer."""
    from ad.history import writer as writer_module

    path = tmp_path / "ds"
    writer = HistoryWriter(path, SPEC, family="synthetic", metadata={})
    saves = []
    real_save = writer._save
    monkeypatch.setattr(writer, "_save", lambda: (saves.append(1), real_save()))
    monkeypatch.setattr(writer_module, "JSON_TIME_SHARE", 1e-9)  # every rewrite now counts as expensive
    monkeypatch.setattr(writer_module, "JSON_CHEAP_SECONDS", 0.0)
    rng = np.random.default_rng(0)
    for k in range(5):
        with writer.unit(f"t{k}", 0) as unit:
            unit.append(synthetic_columns(rng, 2, 50, goal=(0, 0)))
    assert saves == [] and HistoryReader(path).units() == []  # the rewrite at open was "expensive": none since
    assert HistoryWriter(path, SPEC, family="synthetic", metadata={}).is_complete("t4", 0)  # adopted from markers
    writer.sync()
    assert len(HistoryReader(path).units()) == 5
