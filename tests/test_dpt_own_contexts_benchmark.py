"""benchmarks/dpt_own_contexts.py: the demo's DPT, a round of recording its runs on the training tasks and fine-tuning
it on them, one held-out evaluation of both, and the figures merged into the results file."""
import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.common as common  # noqa: E402
import benchmarks.dpt_own_contexts as bench  # noqa: E402
from ad.history import HistoryReader  # noqa: E402


def test_quick_run_fine_tunes_dpt_on_its_recorded_runs_and_reports_both(monkeypatch, tmp_path):
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    out = tmp_path / "work"
    monkeypatch.setattr(sys, "argv", ["dpt_own_contexts.py", "--quick", "--seeds", "0", "--out", str(out)])
    bench.main(bench.options())
    work = out / "keydoor-seed0-quick"
    recorded = HistoryReader(work / "own-1")
    data = HistoryReader(work / "demo" / "keydoor")
    assert recorded.metadata["source"]["ckpt"] == str(work / "demo" / "dpt")  # the demo's DPT acted
    assert set(recorded.tasks()) <= set(data.metadata["split"]["train"]) and len(recorded.tasks()) == 3
    config = yaml.safe_load((work / "dpt-own-1" / "config.yaml").read_text())
    assert config["init_from"] == str(work / "demo" / "dpt") and config["subsample"] == 1
    assert config["objective"] == "dpt" and config["data"] == str(work / "own-1")
    summary = json.loads((work / "eval" / "eval.json").read_text())
    assert summary["tasks"] == data.metadata["split"]["heldout"]
    assert {"DPT", "DPT own 1", "random"} <= set(summary["policies"])
    figures = json.loads((tmp_path / "results" / "dpt_own_contexts_quick.json").read_text())
    row = next(f["details"] for f in figures if "details" in f)
    assert row["window"] == [3, 4] and set(row["models"]) == {"DPT", "DPT own 1"}
    own = [f for f in figures if "DPT own 1" in f["figure"] and "seed 0" in f["figure"]]
    assert own[0]["reference"] == pytest.approx(row["models"]["DPT"]["window"])
    assert own[0]["ours"] == pytest.approx(row["models"]["DPT own 1"]["window"])
    assert (tmp_path / "results" / "dpt_own_contexts_keydoor_quick.png").is_file()
