"""`ad demo --task keydoor` on tiny settings: the pipeline runs end to end on held-out key/door pairs; bad input."""
import contextlib
import io
import json

import pytest
import yaml

from ad import cli, registry
from ad.config import make_config
from ad.demo import run_ad_demo
from ad.errors import UserError
from tasks.keydoor.demo import KeyDoorDemoConfig

TINY = dict(tasks=10, steps_per_task=5000, heldout_fraction=0.2, ad_steps=3, ed_steps=2, episodes=3, seeds=1,
            context=20, subsample=2,
            train_overrides={"n_embd": 16, "n_head": 2, "n_ff": 32, "warmup_steps": 1, "progress": False,
                             "batch_size": 2})


def test_tiny_demo_evaluates_ad_ed_source_and_random_on_held_out_pairs(tmp_path):
    config = make_config(KeyDoorDemoConfig, {"out": str(tmp_path / "demo"), "seed": 1, "ent_coef": 0.03, "dropout": 0.2,
                                             **TINY})
    with contextlib.redirect_stdout(io.StringIO()):
        report = run_ad_demo(config)
    out = tmp_path / "demo"
    summary = json.loads((out / "eval" / "eval.json").read_text())
    meta = json.loads((out / "keydoor" / "dataset.json").read_text())
    assert summary["tasks"] == meta["split"]["heldout"] and len(summary["tasks"]) == 2
    assert meta["source"]["config"]["ent_coef"] == 0.03  # the demo's source option reaches the generator
    assert set(summary["policies"]) == {"AD", "ED", "random", "source"} and summary["optimal_mean_return"] == 2.0
    assert all(len(row["normalised"]) == 3 for row in summary["policies"].values())
    ad_cfg = yaml.safe_load((out / "ad" / "config.yaml").read_text())
    assert (ad_cfg["context"], ad_cfg["subsample"], ad_cfg["num_states"], ad_cfg["episode_length"]) == (20, 2, 81, 50)
    ed_cfg = yaml.safe_load((out / "ed" / "config.yaml").read_text())
    assert ad_cfg["attn_dropout"] == ad_cfg["resid_dropout"] == ed_cfg["resid_dropout"] == 0.2
    assert "Dark Key-to-Door" in report.read_text()


@pytest.mark.parametrize("values", [{"heldout_fraction": 0.0}, {"heldout_fraction": 1.0}, {"tasks": -1},
                                    {"steps_per_task": -1}, {"subsample": -1}, {"context": 0}, {"ent_coef": -0.01},
                                    {"ent_coef": float("nan")}, {"dropout": 1.0}, {"dropout": -0.1},
                                    {"dropout": float("nan")}])
def test_bad_demo_options_are_user_errors(values):
    with pytest.raises(UserError):
        config = make_config(KeyDoorDemoConfig, values)
        make_config(registry.get("generate", "keydoor").config_cls, {**config.generate_options(), "out": "x"})


def test_source_defaults():
    """Options left at 0 take the source's default; the explorer's steps hold 60 episodes a stream."""
    a2c = make_config(KeyDoorDemoConfig, {})
    assert (a2c.steps_per_task, a2c.subsample) == (120_000, 40) and "source" not in a2c.generate_options()
    explorer = make_config(KeyDoorDemoConfig, {"source": "explorer", "episode_length": 60})
    assert (explorer.steps_per_task, explorer.subsample) == (60 * 10 * 60, 1)
    assert explorer.generate_options()["source"] == "explorer"
    assert make_config(KeyDoorDemoConfig, {"source": "explorer", "subsample": 3}).subsample == 3


def test_ad_demo_task_keydoor_is_registered(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--task", "keydoor", "--help"])
    assert exit_info.value.code == 0 and "--steps-per-task" in capsys.readouterr().out
