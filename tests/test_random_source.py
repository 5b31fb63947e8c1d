"""The random source (`tasks.random_source`, `ad generate bandit|darkroom|keydoor --source random`): the DPT paper's
contexts. Per-history action distributions independent of the task, exact logprobs, resuming, bad input, and the
demo option that trains DPT on them."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ad.history import content_hash
from tasks.random_source import behaviour_distributions, sample_actions
from tests.cli_run import run_cli
from tests.test_noise_source import QUIET, _meta, _read



def _interrupt_at_the_fifth(monkeypatch, module, name: str):
    """Make ``module.name`` raise KeyboardInterrupt on its fifth call; returns the real function."""
    calls, real = [0], getattr(module, name)

    def interrupting(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, interrupting)
    return real


# ----------------------------------------------------------------------------------------------------- the engine
def test_dirichlet_distributions_mix_a_point_mass_and_sum_to_one():
    rng = np.random.default_rng(0)
    probs = behaviour_distributions(rng, 4000, 5, "dirichlet", 1.0, 1.0)
    assert probs.shape == (4000, 5) and np.allclose(probs.sum(axis=1), 1.0) and (probs >= 0).all()
    assert (probs.max(axis=1) == 1.0).mean() == pytest.approx(1 / 11, abs=0.02)  # w = 1: a single action
    assert probs.mean(axis=0) == pytest.approx(np.full(5, 0.2), abs=0.02)  # no action favoured on average
    no_mix = behaviour_distributions(rng, 2000, 5, "dirichlet", 1.0, 0.0)
    assert (no_mix.max(axis=1) < 1.0).all()
    assert np.array_equal(behaviour_distributions(rng, 3, 4, "uniform"), np.full((3, 4), 0.25))


def test_sampled_actions_follow_their_distribution_with_exact_logprobs():
    probs = np.array([[0.7, 0.0, 0.3], [0.1, 0.2, 0.7], [0.0, 0.0, 1.0]])
    action, logprob = sample_actions(probs, np.random.default_rng(1).random((3, 20_000)))
    assert action.shape == logprob.shape == (3, 20_000)
    for row, p in enumerate(probs):
        freq = np.bincount(action[row], minlength=3) / 20_000
        assert freq == pytest.approx(p, abs=0.015)
        assert np.allclose(logprob[row], np.log(p[action[row]]))
    assert np.isfinite(logprob).all()  # a zero-probability action is never drawn


# ------------------------------------------------------------------------------------------------------- bandits
def test_bandit_random_histories_are_independent_of_the_best_arm(tmp_path, capsys):
    out = tmp_path / "bandit"
    code, err, _ = run_cli(capsys, "generate", "bandit", "--source", "random", "--instances", "300", "--pulls", "60",
                           "--progress", "false", "--out", str(out))
    assert code == 0, err
    meta, rows = _meta(out), _read(out)
    assert meta["source"]["algorithm"] == "random"
    assert meta["source"]["config"]["random_policy"] == "dirichlet" and "noise_start" not in meta["source"]["config"]
    best_share, most_is_best = [], []
    for unit in meta["units"].values():
        info, pick = unit["info"], rows["task"] == unit["task"]
        probs, means, actions = np.array(info["behaviour_probs"]), np.array(info["means"]), rows["action"][pick]
        assert len(actions) == 60 and np.allclose(rows["logprob"][pick], np.log(probs[0, actions]), atol=1e-6)
        counts = np.bincount(actions, minlength=5)
        best_share.append(counts[means.argmax()] / 60)
        most_is_best.append(counts.argmax() == means.argmax())
    assert np.mean(best_share) == pytest.approx(0.2, abs=0.05)  # UCB1's histories: ~0.8 (the best arm dominates)
    assert np.mean(most_is_best) == pytest.approx(0.2, abs=0.07)


def test_bandit_random_histories_per_instance_are_streams(tmp_path, capsys):
    out = tmp_path / "bandit"
    code, err, _ = run_cli(capsys, "generate", "bandit", "--source", "random", "--histories", "3", "--instances", "6",
                           "--pulls", "40", "--progress", "false", "--out", str(out))
    assert code == 0, err
    meta, rows = _meta(out), _read(out)
    for unit in meta["units"].values():
        probs, pick = np.array(unit["info"]["behaviour_probs"]), rows["task"] == unit["task"]
        streams, actions = rows["stream"][pick], rows["action"][pick]
        assert probs.shape == (3, 5) and np.bincount(streams).tolist() == [40, 40, 40]
        assert np.allclose(rows["logprob"][pick], np.log(probs[streams, actions]), atol=1e-6)
        assert np.array_equal(rows["update"][pick], np.tile(np.arange(40), 3))
    code, err, _ = run_cli(capsys, "generate", "bandit", "--source", "ucb", "--histories", "2",
                           "--out", str(tmp_path / "bad"))
    assert code == 2 and "--histories" in err


def test_bandit_random_resumes_byte_identical(tmp_path, capsys, monkeypatch):
    import tasks.bandit.generate as generate

    argv = ["generate", "bandit", "--source", "random", "--instances", "12", "--pulls", "30", "--progress", "false"]
    whole = tmp_path / "whole"
    assert run_cli(capsys, *argv, "--out", str(whole))[0] == 0
    out = tmp_path / "resumed"
    real = _interrupt_at_the_fifth(monkeypatch, generate, "unit_columns")
    assert run_cli(capsys, *argv, "--out", str(out))[0] == 130
    monkeypatch.setattr(generate, "unit_columns", real)
    code, err, printed = run_cli(capsys, *argv, "--out", str(out))
    assert code == 0 and "resuming: 4 of 12 instances" in printed
    assert content_hash(out) == content_hash(whole)


# ---------------------------------------------------------------------------------------------------- grid rooms
def test_darkroom_random_streams_act_from_their_own_distribution(tmp_path, capsys):
    out = tmp_path / "dr"
    code, err, _ = run_cli(capsys, "generate", "darkroom", "--source", "random", "--random-policy", "dirichlet",
                           "--size", "5", "--steps-per-goal", "960", "--num-envs", "4", "--episode-length", "12",
                           "--seed", "3", *QUIET, "--out", str(out))
    assert code == 0, err
    meta, rows = _meta(out), _read(out)
    assert meta["source"]["algorithm"] == "random" and meta["source"]["config"]["episodes_per_stream"] == 20
    assert len(meta["units"]) == 24 and meta["split"]["heldout"]
    for unit in meta["units"].values():
        probs = np.array(unit["info"]["behaviour_probs"])  # (streams, actions)
        pick = rows["task"] == unit["task"]
        streams, actions = rows["stream"][pick], rows["action"][pick]
        assert probs.shape == (4, 5) and np.allclose(rows["logprob"][pick], np.log(probs[streams, actions]), atol=1e-6)
    shares = [np.array(u["info"]["behaviour_probs"]) for u in meta["units"].values()]
    assert len({s.tobytes() for s in shares}) == 24  # every goal's streams draw their own distributions


def test_darkroom_random_is_uniform_by_default_and_resumes(tmp_path, capsys, monkeypatch):
    import tasks.grid.noise as noise_generate

    argv = ["generate", "darkroom", "--source", "random", "--size", "5", "--steps-per-goal", "480", "--num-envs", "2",
            "--episode-length", "12", *QUIET]
    whole = tmp_path / "whole"
    assert run_cli(capsys, *argv, "--out", str(whole))[0] == 0
    rows = _read(whole)
    assert np.allclose(rows["logprob"], np.log(0.2))
    assert np.bincount(rows["action"], minlength=5) / len(rows["action"]) == pytest.approx(np.full(5, 0.2), abs=0.02)
    out = tmp_path / "resumed"
    real = _interrupt_at_the_fifth(monkeypatch, noise_generate, "return_record")
    assert run_cli(capsys, *argv, "--out", str(out))[0] == 130
    monkeypatch.setattr(noise_generate, "return_record", real)
    code, err, printed = run_cli(capsys, *argv, "--out", str(out))
    assert code == 0 and "resuming: 4 of 24 goals" in printed
    assert content_hash(out) == content_hash(whole)


def test_keydoor_random_records_exact_logprobs(tmp_path, capsys):
    out = tmp_path / "kd"
    code, err, _ = run_cli(capsys, "generate", "keydoor", "--source", "random", "--size", "5", "--tasks", "6",
                           "--steps-per-task", "600", "--num-envs", "2", *QUIET, "--out", str(out))
    assert code == 0, err
    meta, rows = _meta(out), _read(out)
    assert meta["source"]["algorithm"] == "random" and len(meta["units"]) == 6
    assert np.allclose(rows["logprob"], np.log(0.2)) and set(np.unique(rows["action"])) == set(range(5))


# ------------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("family", ["bandit", "darkroom", "keydoor"])
@pytest.mark.parametrize("option,value,message", [
    ("--random-alpha", "0", "--random-alpha must be positive and finite"),
    ("--random-alpha", "inf", "--random-alpha"),
    ("--random-mix", "1.5", "--random-mix must be in [0, 1]"),
    ("--random-mix", "nan", "--random-mix")])
def test_bad_random_options_are_one_error_line(tmp_path, capsys, family, option, value, message):
    out = tmp_path / "bad"
    code, err, _ = run_cli(capsys, "generate", family, "--source", "random", option, value, "--out", str(out))
    assert code == 2 and message in err
    assert not out.exists()


# ----------------------------------------------------------------------------------------------------- the demo
def test_bandit_demo_trains_dpt_on_random_contexts_of_the_same_split(tmp_path, capsys):
    out = tmp_path / "demo"
    code, err, _ = run_cli(capsys, "demo", "--task", "bandit", "--methods", "dpt", "--dpt-data", "random",
                           "--instances", "30", "--pulls", "20", "--ad-steps", "5", "--eval-envs", "1",
                           "--out", str(out))
    assert code == 0, err
    data, random = _meta(out / "data"), _meta(out / "data-random")
    assert random["source"]["algorithm"] == "random" and data["source"]["algorithm"] == "ucb"
    assert random["split"] == data["split"]
    import yaml

    assert yaml.safe_load((out / "dpt" / "config.yaml").read_text())["data"] == str(out / "data-random")
    assert "DPT" in json.loads((out / "regret.json").read_text())["policies"]
