"""benchmarks/noise_distillation.py: noise-distillation histories -> AD -> in-context evaluation, and its figures (AD's
return / optimum over the data's best policy, per seed and their mean) merged into the results file."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.common as common  # noqa: E402
import benchmarks.noise_distillation as bench  # noqa: E402


def parse(monkeypatch, *argv: str):
    monkeypatch.setattr(sys, "argv", ["noise_distillation.py", *argv])
    return bench.options()


def test_the_histories_hold_the_asked_episodes_of_the_family_length(monkeypatch):
    args = parse(monkeypatch, "--family", "keydoor", "--streams", "3", "--episodes-per-stream", "7", "--tasks", "40")
    options = bench.generate_options(args, seed=4)
    assert options["steps_per_task"] == 3 * 7 * 50 and options["episode_length"] == 50  # Key-to-Door's 50 steps
    assert options["tasks"] == 40 and options["seed"] == 4 and options["max_return_fraction"] == 0.5
    args = parse(monkeypatch, "--episode-length", "30", "--cap", "0.4", "--terminate-on-goal", "1")
    options = bench.generate_options(args, seed=0)
    assert options["steps_per_goal"] == 10 * 60 * 30 and options["terminate_on_goal"] is True
    assert options["max_return_fraction"] == 0.4 and "tasks" not in options


def test_quick_run_writes_each_seed_and_their_mean_and_keeps_other_seeds(monkeypatch, tmp_path):
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    out = str(tmp_path / "work")
    bench.main(parse(monkeypatch, "--quick", "--seeds", "0", "--out", out, "--greedy", "0"))
    first = json.loads((tmp_path / "results" / "noise_distillation_quick.json").read_text())
    per_seed = [f for f in first if "details" in f]
    assert [f["details"]["seed"] for f in per_seed] == [0]
    row = per_seed[0]["details"]
    assert 0.0 <= row["ad"] <= 1.0 and row["window"] == [5, 6]  # QUICK: 6 episodes, the last 2 averaged
    assert row["data_best_exact"] == pytest.approx(0.5, abs=0.05)  # the cap: the best noise level's expectation
    assert per_seed[0]["ratio"] == pytest.approx(row["ad"] / row["data_best"], rel=1e-3)
    assert (Path(out) / "darkroom-seed0-quick" / "ad" / "model" / "config.json").is_file()

    bench.main(parse(monkeypatch, "--quick", "--seeds", "1", "--out", out, "--greedy", "0"))
    both = json.loads((tmp_path / "results" / "noise_distillation_quick.json").read_text())
    rows = [f["details"] for f in both if "details" in f]
    assert [r["seed"] for r in rows] == [0, 1] and rows[0] == row  # seed 0's figure kept as it was
    mean = [f for f in both if "mean of 2 seeds" in f["figure"]]
    assert len(mean) == 1 and mean[0]["ours"] == pytest.approx((rows[0]["ad"] + rows[1]["ad"]) / 2, rel=1e-3)
    assert not mean[0].get("headline")  # a quick run never sets the headline
