"""`ad demo --task metaworld`: its options reach `ad generate metaworld` and `ad train rl`, bad options are one error
line, `ad eval` counts an episode as a success when any of its steps succeeds, and (slow) the demo end to end at
tiny settings."""
from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

pytest.importorskip("metaworld")
importlib.import_module("tasks.metaworld")  # registers the family, its demo and its eval env

from ad import registry  # noqa: E402
from ad.config import make_config  # noqa: E402
from ad.evaluate import EvalEnv, RandomPolicy, run_in_context  # noqa: E402
from tasks.metaworld.demo import MetaWorldDemoConfig  # noqa: E402
from cli_run import run_cli  # noqa: E402

TINY = ["--train-goals", "0-1", "--heldout-goals", "0-1", "--history-episodes", "10", "--episode-length", "6",
        "--context", "6", "--subsample", "1", "--ad-steps", "3", "--ed-steps", "3", "--episodes", "2",
        "--batch-size", "2"]


def test_demo_options_reach_the_generator_and_the_trainer(tmp_path):
    assert registry.get_demo("metaworld", "rl").config_cls is MetaWorldDemoConfig
    demo = make_config(MetaWorldDemoConfig, {"skill": "push-v3", "train_goals": "0-3", "heldout_goals": "5",
                                             "history_episodes": 20, "episode_length": 70, "ml1_seed": 3})
    generate = make_config(registry.get("generate", "metaworld").config_cls,
                           {**demo.generate_options(), "out": str(tmp_path / "d")})
    assert (generate.skill, generate.source, generate.train_goals, generate.heldout_goals, generate.episodes,
            generate.episode_length, generate.ml1_seed) == ("push-v3", "noise", "0-3", "5", 20, 70, 3)
    assert generate.progress  # the demo's longest stage on a CPU shows its progress like every family's
    train = demo.train_options()
    assert train["reward_kind"] == "continuous" and train["reward_weight"] == 0.0 and train["context"] == 320
    assert [label for label, _ in demo.runs()] == ["AD", "ED"]
    search = make_config(MetaWorldDemoConfig, {"source": "search", "history_runs": 3})
    options = search.generate_options()
    assert (options["source"], options["runs"]) == ("search", 3)


@pytest.mark.parametrize("argv, message", [
    (["--history-episodes", "0"], "--history-episodes"),
    (["--heldout-goals", ""], "--heldout-goals"),
    (["--skill", "reach-v9"], "reach-v3"),
    (["--history-runs", "0"], "--history-runs"),
    (["--ml1-seed", "-1"], "--ml1-seed"),
    (["--source", "search", "--skill", "push-v3"], "reach-v3"),
])
def test_bad_demo_options_are_one_error_line(argv, message, tmp_path, capsys):
    code, err, _ = run_cli(capsys, "demo", "--task", "metaworld", "--out", str(tmp_path / "o"), *argv)
    assert code == 2 and message in err


class _SuccessEnv:
    """Two envs, 3-step episodes; env 0 succeeds at step 1 of episode 1 only, env 1 at every last step."""

    num_envs = 2

    def reset(self, seed=None):
        self.t = 0
        return np.zeros((2, 1), np.float32), {}

    def step(self, actions):
        step, episode = self.t % 3, self.t // 3
        self.t += 1
        success = np.array([episode == 0 and step == 1, step == 2])
        done = np.full(2, step == 2)
        return np.zeros((2, 1), np.float32), np.ones(2), np.zeros(2, bool), done, {"success": success}


def test_eval_counts_an_episode_as_a_success_when_any_step_succeeds():
    setup = EvalEnv(_SuccessEnv(), ["a", "b"], 1, np.ones(2), 2)
    result = run_in_context(RandomPolicy(2), setup, 3, progress=False)
    assert result.extra["success"][:, 0].tolist() == [[True, False, False], [True, True, True]]
    assert result.success_curve().tolist() == [1.0, 0.5, 0.5] and result.returns.max() == 3


@pytest.mark.slow
def test_demo_end_to_end_at_tiny_settings(tmp_path, capsys):
    out = tmp_path / "demo"
    assert run_cli(capsys, "demo", "--task", "metaworld", "--out", str(out), *TINY)[0] == 0
    summary = json.loads((out / "eval" / "eval.json").read_text())
    assert set(summary["policies"]) >= {"AD", "ED", "random", "source"}
    for name in ("AD", "ED", "random"):
        assert len(summary["policies"][name]["success"]) == 2
    assert (out / "report.md").is_file() and (out / "ad" / "model" / "config.json").is_file()


def test_demo_ad_init_from_starts_ad_alone_from_a_finished_run(tmp_path, capsys):
    import yaml

    first, second = tmp_path / "first", tmp_path / "second"
    assert run_cli(capsys, "demo", "--task", "metaworld", "--out", str(first), *TINY)[0] == 0
    assert run_cli(capsys, "demo", "--task", "metaworld", "--out", str(second), *TINY,
                   "--ad-init-from", str(first / "ad"))[0] == 0
    assert yaml.safe_load((second / "ad" / "config.yaml").read_text())["init_from"] == str(first / "ad")
    assert yaml.safe_load((second / "ed" / "config.yaml").read_text())["init_from"] == ""
    code, err, _ = run_cli(capsys, "demo", "--task", "metaworld", "--out", str(tmp_path / "third"), *TINY,
                           "--ad-init-from", str(tmp_path / "nowhere"))
    assert code == 2 and "--ad-init-from" in err and "no trained model there" in err
    assert not (tmp_path / "third").exists()  # refused before anything is written
