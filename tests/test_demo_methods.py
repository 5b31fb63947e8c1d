"""``ad demo --methods``: the chosen in-context methods (AD, ED, DPT) trained on the same histories and compared on
the same held-out tasks in one report and one plot; the default stays AD and ED."""
import contextlib
import io
import json

import pytest
import yaml

from ad import cli
from ad.config import make_config
from ad.demo import parse_methods, run_ad_demo
from ad.errors import UserError
from tasks.bandit.demo import run_demo as run_bandit_demo
from tasks.darkroom.demo import DarkRoomDemoConfig

TINY_TRAIN = {"n_embd": 16, "n_head": 2, "n_ff": 32, "warmup_steps": 1, "progress": False, "batch_size": 2}


def test_methods_parse_commas_and_refuse_unknown_repeated_or_none():
    assert parse_methods(["ad,dpt", "ED"]) == ["ad", "dpt", "ed"]
    assert parse_methods("dpt") == ["dpt"]
    for bad, message in (("ad,foo", "unknown method 'foo'"), ("ad,ad", "repeated"), ([], "no method")):
        with pytest.raises(UserError, match=message):
            parse_methods(bad)
    assert make_config(DarkRoomDemoConfig, {}).methods == ["ad", "ed"]  # the default demo is unchanged


def test_darkroom_demo_compares_ad_dpt_and_ed_on_the_same_held_out_goals(tmp_path):
    out = tmp_path / "demo"
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--task", "darkroom", "--methods", "ad,dpt,ed", "--out", str(out), "--size", "3",
                  "--streams", "2", "--steps-per-goal", "400", "--ad-steps", "3", "--ed-steps", "2",
                  "--dpt-steps", "2", "--episodes", "4", "--seeds", "1", "--context", "20",
                  "--train-overrides", json.dumps(TINY_TRAIN)])
    assert exit_info.value.code == 0
    summary = json.loads((out / "eval" / "eval.json").read_text())
    meta = json.loads((out / "darkroom" / "dataset.json").read_text())
    assert summary["tasks"] == meta["split"]["heldout"]
    assert list(summary["policies"]) == ["AD", "DPT", "ED", "random", "source"]
    dpt = yaml.safe_load((out / "dpt" / "config.yaml").read_text())
    ad = yaml.safe_load((out / "ad" / "config.yaml").read_text())
    assert (dpt["objective"], dpt["max_steps"], ad["objective"]) == ("dpt", 2, "ad")
    assert dpt["subsample"] == ad["subsample"] and dpt["context"] == ad["context"]  # the same windows as AD
    report = (out / "report.md").read_text()
    assert "In-context methods (AD, DPT, ED)" in report and "| DPT |" in report and "| ED |" in report
    assert "DPT reaches" in report or "DPT does not reach" in report
    assert (out / "eval" / "in_context.png").stat().st_size > 1000
    timings = json.loads((out / "timings.json").read_text())  # each stage's wall time, for the benchmarks
    stages = timings["seconds"]
    assert {"train AD", "train DPT", "train ED", "evaluate in context"} <= set(stages) and timings["threads"] == 1
    assert stages["total"] == pytest.approx(sum(v for k, v in stages.items() if k != "total"))
    # the same models at another sampling temperature: evaluated beside the first evaluation, which is kept
    first = (out / "eval" / "eval.json").read_bytes()
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--task", "darkroom", "--methods", "ad,dpt,ed", "--out", str(out), "--size", "3",
                  "--streams", "2", "--steps-per-goal", "400", "--ad-steps", "3", "--ed-steps", "2",
                  "--dpt-steps", "2", "--episodes", "4", "--seeds", "1", "--context", "20", "--temperature", "0.5",
                  "--train-overrides", json.dumps(TINY_TRAIN)])
    assert exit_info.value.code == 0
    assert (out / "eval" / "eval.json").read_bytes() == first
    assert json.loads((out / "timings.json").read_text()) == timings  # the first run's files are kept
    folder = out / "eval-temperature-0.5"  # its evaluation, report and timings
    tempered = json.loads((folder / "eval.json").read_text())
    assert tempered["temperature"] == 0.5 and tempered["tasks"] == summary["tasks"]
    assert json.loads((folder / "timings.json").read_text())["seconds"]["train AD"] == 0.0  # training was skipped
    report = (folder / "report.md").read_text()
    assert "actions sampled at temperature 0.5" in report and "](in_context.png)" in report
    curves = (out / "darkroom" / "learning_curves.png").is_file()  # the source's plot, where it writes one
    assert ("](../darkroom/learning_curves.png)" in report) == curves
    with pytest.raises(UserError, match="--temperature must be a finite number > 0"):
        make_config(DarkRoomDemoConfig, {"temperature": 0.0})


def test_bandit_demo_trains_dpt_beside_ad(tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        summary = run_bandit_demo(tmp_path / "b", seed=2, methods=["ad", "dpt"], instances=16, pulls=12,
                                  ad_steps=2, dpt_steps=2, batch_size=2, heldout_fraction=0.25, eval_envs=1,
                                  train_overrides={k: v for k, v in TINY_TRAIN.items() if k != "batch_size"})
    assert list(summary["policies"])[:2] == ["AD", "DPT"] and "ED" not in summary["policies"]
    assert yaml.safe_load((tmp_path / "b" / "dpt" / "config.yaml").read_text())["objective"] == "dpt"
    assert "In-context methods (AD, DPT)" in (tmp_path / "b" / "report.md").read_text()


def test_eval_models_option_needs_distinct_label_equals_folder():
    from ad.commands.evaluate import EvalConfig

    cfg = make_config(EvalConfig, {"ckpt": "a", "data": "d", "models": ["DPT=runs/dpt", "ED=runs/ed"]})
    assert cfg.named_models() == [("AD", "a"), ("DPT", "runs/dpt"), ("ED", "runs/ed")]
    for models, message in ((["runs/dpt"], "not LABEL=RUN_FOLDER"), (["AD=x"], "labelled 'AD'"),
                            (["random=x"], "a row the evaluation adds itself")):
        with pytest.raises(UserError, match=message):
            make_config(EvalConfig, {"ckpt": "a", "data": "d", "models": models})


def test_darkroom_demo_trains_dpt_on_random_contexts_of_the_same_goals(tmp_path):
    out = tmp_path / "demo"
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--task", "darkroom", "--methods", "ad,dpt", "--dpt-data", "random", "--out", str(out),
                  "--size", "3", "--streams", "2", "--steps-per-goal", "400", "--ad-steps", "2", "--dpt-steps", "2",
                  "--episodes", "3", "--seeds", "1", "--context", "20", "--train-overrides", json.dumps(TINY_TRAIN)])
    assert exit_info.value.code == 0
    own, random = (json.loads((out / name / "dataset.json").read_text()) for name in ("darkroom", "darkroom-random"))
    assert random["source"]["algorithm"] == "random" and random["split"] == own["split"]
    assert random["task_spec"]["random_start"] is True  # contexts that cover the room, as the DPT paper's
    dpt = yaml.safe_load((out / "dpt" / "config.yaml").read_text())
    ad = yaml.safe_load((out / "ad" / "config.yaml").read_text())
    assert dpt["data"] == str(out / "darkroom-random") and ad["data"] == str(out / "darkroom")
    summary = json.loads((out / "eval" / "eval.json").read_text())
    assert summary["tasks"] == own["split"]["heldout"] and "DPT" in summary["policies"]


@pytest.mark.parametrize("task, extra, data", [
    ("darkroom", ["--size", "3", "--streams", "2", "--steps-per-goal", "400", "--episodes", "3", "--context", "20"],
     "darkroom"),
    ("keydoor", ["--tasks", "10", "--steps-per-task", "5000", "--heldout-fraction", "0.2", "--episodes", "2",
                 "--context", "20"], "keydoor"),
])
def test_demo_trains_dpt_on_noise_histories_of_the_same_tasks(tmp_path, task, extra, data):
    out = tmp_path / "demo"
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--task", task, "--methods", "ad,dpt", "--dpt-data", "noise", "--out", str(out),
                  *extra, "--ad-steps", "2", "--dpt-steps", "2", "--seeds", "1",
                  "--train-overrides", json.dumps(TINY_TRAIN)])
    assert exit_info.value.code == 0
    own, noise = (json.loads((out / name / "dataset.json").read_text()) for name in (data, f"{data}-noise"))
    assert noise["source"]["algorithm"] == "noise" and own["source"]["algorithm"] != "noise"
    assert noise["split"] == own["split"]  # the same held-out tasks: DPT never trains on them either
    dpt = yaml.safe_load((out / "dpt" / "config.yaml").read_text())
    ad = yaml.safe_load((out / "ad" / "config.yaml").read_text())
    assert dpt["data"] == str(out / f"{data}-noise") and ad["data"] == str(out / data)
    summary = json.loads((out / "eval" / "eval.json").read_text())
    assert summary["tasks"] == own["split"]["heldout"] and "DPT" in summary["policies"]
