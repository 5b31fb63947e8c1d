"""benchmarks/train_precision.py: bf16-mixed and float32 AD trained side by side on Meta-World histories."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.common as common  # noqa: E402
import benchmarks.train_precision as bench  # noqa: E402


@pytest.mark.slow  # Meta-World histories and two trainings: about 30 s
def test_quick_run_times_both_precisions_and_compares_their_fit(monkeypatch, tmp_path):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(sys, "argv", ["train_precision.py", "--quick"])
    bench.main(bench.options())
    speed, fit = json.loads((tmp_path / "train_precision_quick.json").read_text())
    assert speed["unit"] == "steps/s" and speed["ours"] > 0 and speed["reference"] > 0
    assert speed["ratio"] == speed["ours"] / speed["reference"]
    assert fit["unit"] == "nats" and fit["met"] == ("yes" if abs(fit["ours"] - fit["reference"]) <= 0.05 else "no")
    assert abs(fit["ours"] - fit["reference"]) < 0.2  # the same weights after 12 steps: bfloat16 rounding only
    assert all(not f["current"] and f["capability"] == "AD transformer training speed" for f in (speed, fit))
