"""`ad eval` checks that a checkpoint fits a dataset from what both recorded (family, the family's declared env
parameters, spaces, episode length), including a dataset and a checkpoint written by an older release.

``tests/data/main-1ae905f/`` holds a 3x3 DarkRoom dataset (``ad generate darkroom --size 3 --steps-per-goal 200
--hidden 16``) and a tiny AD model trained on it (``ad train rl --n-layer 1 --n-embd 16 --max-steps 2``), both
written by main at commit 1ae905f: they must keep loading and keep being checked."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from ad import cli, registry
from ad.commands.evaluate import check_compatible
from ad.errors import UserError
from ad.history import HistoryReader

OLD = Path(__file__).parent / "data" / "main-1ae905f"
QUIET = ["--progress", "false"]


@pytest.fixture
def old_pair(tmp_path):
    """(dataset, checkpoint) written by main at 1ae905f, copied so that nothing here touches the committed files."""
    shutil.copytree(OLD, tmp_path / "old")
    return tmp_path / "old" / "darkroom3", tmp_path / "old" / "ad-darkroom3"


def _eval(ckpt, data, out):
    return cli.run(["eval", "--ckpt", str(ckpt), "--data", str(data), "--episodes", "2", "--seeds", "1",
                    "--threads", "1", *QUIET, "--out", str(out)])


def test_an_old_checkpoint_evaluates_on_its_old_dataset(old_pair, tmp_path):
    data, ckpt = old_pair
    assert _eval(ckpt, data, tmp_path / "eval") == 0
    summary = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert summary["tasks"] == HistoryReader(data).metadata["split"]["heldout"]
    assert {"AD", "random"} <= set(summary["policies"])


@pytest.mark.parametrize("argv, message", [
    (["generate", "darkroom", "--size", "4", "--source", "explorer", "--steps-per-goal", "200", "--num-envs", "1",
      "--tensorboard", "false", "--plots", "false"], "trained on darkroom with size 3 but dataset .* has size 4"),
    (["generate", "bandit", "--arms", "5", "--instances", "8", "--pulls", "10", "--heldout-fraction", "0.25"],
     "trained on darkroom histories but dataset .* is bandit"),
    (["generate", "keydoor", "--size", "3", "--tasks", "4", "--heldout-fraction", "0.5", "--steps-per-task", "200", "--episode-length", "12",
      "--hidden", "16", "--tensorboard", "false", "--plots", "false"],
     "trained on darkroom histories but dataset .* is keydoor"),
])
def test_an_old_checkpoint_is_refused_on_a_dataset_of_other_tasks(old_pair, tmp_path, argv, message):
    _, ckpt = old_pair
    other = tmp_path / "other"
    assert cli.run([*argv, *QUIET, "--out", str(other)]) == 0
    with pytest.raises(UserError, match=message):
        _eval(ckpt, other, tmp_path / "eval")
    assert not (tmp_path / "eval").exists()  # refused before anything is written


def test_the_family_declares_which_task_spec_keys_must_match(old_pair):
    """The comparison is generic: the keys come from the family's registration, the values from the two specs."""
    data, _ = old_pair
    reader = HistoryReader(data)
    assert registry.task_kwargs("darkroom") == ("size",) and registry.task_kwargs("bandit") == ("arms", "kind")
    spec = dict(reader.metadata["task_spec"])
    check_compatible(SimpleNamespace(family="darkroom", task_spec=spec), reader, "ckpt")
    # a value the family does not declare (how episodes start) may differ, as before
    check_compatible(SimpleNamespace(family="darkroom", task_spec={**spec, "random_start": True}), reader, "ckpt")
    with pytest.raises(UserError, match="with size 7 but dataset .* has size 3"):
        check_compatible(SimpleNamespace(family="darkroom", task_spec={**spec, "size": 7}), reader, "ckpt")
    # specs recorded the Minari way (Gymnasium id and spaces) are compared for any family
    reader.metadata["task_spec"] = {**spec, "env_id": "ad/DarkRoom-3x3-v0"}
    check_compatible(SimpleNamespace(family="darkroom", task_spec=reader.metadata["task_spec"]), reader, "ckpt")
    with pytest.raises(UserError, match="with env_id CartPole-v1 but dataset .* has env_id ad/DarkRoom-3x3-v0"):
        check_compatible(SimpleNamespace(family="darkroom", task_spec={**spec, "env_id": "CartPole-v1"}), reader,
                         "ckpt")
    reader.metadata["task_spec"] = spec
    with pytest.raises(UserError, match="num_actions=4 but dataset .* has num_actions=5"):
        check_compatible(SimpleNamespace(family=None, task_spec={}, num_actions=4), reader, "ckpt")
    with pytest.raises(UserError, match="episodes of up to 10 steps"):
        check_compatible(SimpleNamespace(family="darkroom", task_spec=spec, episode_length=10), reader, "ckpt")


def test_the_default_family_gives_the_default_dataset_and_demo():
    family = registry.default_family()
    assert family is not None
    out = {f.name: f.default for f in dataclasses.fields(registry.get("generate", family).config_cls)}
    assert registry.default_dataset() == out["out"]
    from ad.commands.evaluate import EvalConfig

    assert EvalConfig(ckpt="x").data == registry.default_dataset()
