"""The noise-distillation source (`tasks.noise`, `ad generate darkroom|keydoor|bandit --source noise`): the schedule,
the exact expected returns and the floor that caps them, the recorded columns and logprobs, resuming, bad input."""
from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.dataset as ds
import pytest

from ad.config import make_config
from ad.errors import UserError
from ad.history import HistoryReader, content_hash
from tasks.darkroom.goals import optimal_return
from tasks.grid.room import shortest_path_actions
from tasks.noise import (TabularTasks, epsilon_floor, epsilon_greedy, epsilon_schedule, expected_return,
                         return_record)
from tests.cli_run import run_cli

QUIET = ["--progress", "false", "--plots", "false", "--tensorboard", "false"]


def _read(out) -> dict[str, np.ndarray]:
    table = ds.dataset([str(p) for p in sorted(out.glob("task=*/**/*.parquet"))], format="parquet").to_table()
    columns = {name: np.array(table.column(name).to_pylist()) for name in table.column_names}
    order = np.lexsort((columns["step"], columns["episode"], columns["stream"], columns["task"]))
    return {name: value[order] for name, value in columns.items()}


def _meta(out) -> dict:
    return json.loads((out / "dataset.json").read_text())


# ------------------------------------------------------------------------------------------------- the schedule
@pytest.mark.parametrize("start,end,fraction,power", [(1.0, 0.0, 1.0, 1.0), (0.8, 0.1, 0.5, 2.0), (1.0, 0.2, 0.3, 0.5)])
def test_schedule_falls_monotonically_from_start_to_end(start, end, fraction, power):
    eps = epsilon_schedule(50, start, end, fraction, power)
    assert eps[0] == pytest.approx(start) and eps[-1] == pytest.approx(end)
    assert np.all(np.diff(eps) <= 1e-12)
    decayed = int(math.ceil(49 * fraction))
    assert np.allclose(eps[decayed:], end)  # after the decay: stays at the end
    if fraction == 1.0 and power == 1.0:
        assert np.allclose(eps, np.linspace(start, end, 50))  # the paper's linear curriculum


def test_schedule_never_goes_below_the_floor():
    eps = epsilon_schedule(20, floor=np.array([0.0, 0.3, 1.0]))  # (3, 20)
    assert eps.shape == (3, 20)
    assert np.allclose(eps[0], np.linspace(1, 0, 20))
    assert eps[1].min() == pytest.approx(0.3) and eps[1, 0] == 1.0 and np.all(np.diff(eps[1]) <= 0)
    assert np.allclose(eps[2], 1.0)


def test_epsilon_greedy_logprobs_are_exact_probabilities():
    rng = np.random.default_rng(0)
    n, A = 200_000, 5
    greedy = rng.integers(0, A, n)
    eps = np.full(n, 0.4)
    action, logprob = epsilon_greedy(greedy, eps, rng.random(n), rng.integers(0, A, n), A)
    expected = np.where(action == greedy, 0.6 + 0.4 / A, 0.4 / A)
    assert np.allclose(np.exp(logprob), expected)
    assert np.mean(action == greedy) == pytest.approx(0.6 + 0.4 / A, abs=0.005)  # the probabilities are the draws'
    _, zero = epsilon_greedy(greedy[:3], np.zeros(3), np.ones(3), greedy[:3], A)
    assert np.all(zero == 0.0)  # epsilon 0: the demonstrator, probability 1


# ------------------------------------------------------------------------------- expected returns and the floor
def test_expected_return_of_the_demonstrator_is_the_exact_optimum():
    from types import SimpleNamespace

    from tasks.darkroom.noise_generate import room_mdp
    from tasks.keydoor.noise_generate import pair_mdp
    from tasks.keydoor.pairs import optimal_return as pair_optimum

    goals = [(0, 0), (2, 3), (4, 4), (1, 4)]
    for terminate in (False, True):
        targets = np.array([r * 5 + c for r, c in goals])
        mdp = room_mdp(5, targets, 12, terminate, False, np.stack([shortest_path_actions(5, t) for t in targets]))
        got = expected_return(mdp, np.zeros(len(goals)))
        assert np.allclose(got, [optimal_return(5, g, 12, terminate) for g in goals])
    pairs = [(0, 0, 4, 4), (2, 2, 0, 1), (3, 1, 1, 3)]
    cfg = SimpleNamespace(size=5, random_start=False, episode_length=20)
    assert np.allclose(expected_return(pair_mdp(cfg, pairs), np.zeros(3)), [pair_optimum(5, p, 20) for p in pairs])


def test_expected_return_matches_a_monte_carlo_of_the_env():
    from tasks.darkroom.vector_env import DarkRoomVectorEnv
    from tasks.darkroom.noise_generate import room_mdp

    target = 0  # goal (0, 0) of a 5x5 room, 10 steps, every step on the goal rewarded
    greedy = shortest_path_actions(5, target)
    mdp = room_mdp(5, np.array([target]), 10, False, False, greedy[None])
    eps, n = 0.5, 4000
    env = DarkRoomVectorEnv([(0, 0)], n, 5, 10, False, False)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(1)
    total = np.zeros(n)
    for _ in range(10):
        action, _ = epsilon_greedy(greedy[obs], np.full(n, eps), rng.random(n), rng.integers(0, 5, n), 5)
        obs, reward, *_ = env.step(action)
        total += reward
    assert total.mean() == pytest.approx(float(expected_return(mdp, np.array([eps]))[0]), abs=4 * total.std() / n**0.5)


def test_floor_is_the_smallest_epsilon_within_the_cap():
    means = np.array([[0.1, 0.9, 0.2], [0.0, 1.0, 0.0]])
    mdp = TabularTasks(np.zeros((2, 1, 3), np.int64), means[:, None, :], np.ones((2, 1, 3), bool), np.ones((2, 1)),
                       means.argmax(1)[:, None], 1)
    f = lambda eps: expected_return(mdp, eps)  # noqa: E731
    floor = epsilon_floor(f, means.max(1), 0.5, ["a", "b"])
    assert np.allclose(f(floor), 0.5 * means.max(1), atol=1e-6)
    assert np.all(f(floor - 1e-4) > 0.5 * means.max(1))  # any less noise exceeds the cap
    assert np.all(epsilon_floor(f, means.max(1), 1.0, ["a", "b"]) == 0.0)
    with pytest.raises(UserError, match="uniformly random actions already get 0.444 of the optimum on a"):
        epsilon_floor(f, means.max(1), 0.3, ["a", "b"])


def test_return_record_reports_best_and_lowest_noise_returns():
    returns = np.array([[0.0, 1.0, 3.0, 2.0], [0.0, 2.0, 1.0, 4.0]])
    record = return_record(returns, np.array([1.0, 0.5, 0.2, 0.2]), 4.0)
    assert record["best_episode_return"] == 4.0 and record["best_episode_fraction"] == 1.0
    assert record["lowest_noise_episodes"] == 2 and record["lowest_noise_mean_return"] == 2.5
    assert record["lowest_noise_mean_fraction"] == 2.5 / 4 and record["first_episode_mean_return"] == 0.0


# ------------------------------------------------------------------------------------------ generated datasets
def _darkroom(tmp_path, name="dr", *extra):
    out = tmp_path / name
    argv = ["generate", "darkroom", "--source", "noise", "--size", "5", "--steps-per-goal", "960", "--num-envs", "4",
            "--episode-length", "12", "--terminate-on-goal", "false", "--seed", "2", *QUIET, *extra, "--out", str(out)]
    return out, argv


def test_darkroom_columns_and_logprobs_follow_the_schedule(tmp_path, capsys):
    out, argv = _darkroom(tmp_path, "dr", "--max-return-fraction", "0.6", "--noise-power", "2")
    code, err, _ = run_cli(capsys, *argv)
    assert code == 0, err
    meta, rows = _meta(out), _read(out)
    assert meta["source"]["algorithm"] == "noise" and meta["source"]["config"]["episodes_per_stream"] == 20
    assert len(meta["units"]) == 24 and set(meta["split"]) == {"train", "heldout"} and meta["split"]["heldout"]
    assert np.all(rows["update"] == rows["episode"])  # the noise level that acted = the episode's index
    for task, info in meta["tasks"].items():
        pick = rows["task"] == task
        eps = epsilon_schedule(20, 1.0, 0.0, 1.0, 2.0, info["noise_floor"])
        level = eps[rows["update"][pick]]
        greedy = shortest_path_actions(5, info["goal"][0] * 5 + info["goal"][1])[rows["state"][pick]]
        prob = (1 - level) * (rows["action"][pick] == greedy) + level / 5
        assert np.allclose(rows["logprob"][pick], np.log(prob), atol=1e-6)
        assert sorted(set(rows["stream"][pick])) == [0, 1, 2, 3] and pick.sum() == 4 * 20 * 12
        assert info["expected_best_fraction"] <= 0.6 + 1e-6
    unit = next(iter(meta["units"].values()))["info"]
    for key in ("best_episode_return", "best_episode_fraction", "lowest_noise_mean_fraction", "noise_floor"):
        assert key in unit


def test_the_cap_holds_in_the_measured_data(tmp_path, capsys):
    out = tmp_path / "cap"
    code, err, _ = run_cli(capsys, "generate", "darkroom", "--source", "noise", "--size", "5", "--steps-per-goal",
                           "9600", "--num-envs", "20", "--episode-length", "12", "--terminate-on-goal", "false",
                           "--max-return-fraction", "0.5", *QUIET, "--out", str(out))
    assert code == 0, err
    units = [u["info"] for u in HistoryReader(out).units()]
    floor_means = np.array([u["lowest_noise_mean_fraction"] for u in units])  # measured, per task
    assert floor_means.mean() < 0.5 + 0.02 and abs(floor_means.mean() - 0.5) < 0.05
    assert all(u["expected_best_fraction"] <= 0.5 + 1e-6 for u in units)
    assert all(u["best_episode_return"] >= u["lowest_noise_mean_return"] for u in units)  # the best is reported
    summary = json.loads((out / "_run" / "summary.json").read_text())
    assert summary["max_expected_best_fraction"] <= 0.5 + 1e-6 and summary["tasks"] == 24


def test_keydoor_demonstrator_goes_to_the_key_then_the_door(tmp_path, capsys):
    out = tmp_path / "kd"
    code, err, _ = run_cli(capsys, "generate", "keydoor", "--source", "noise", "--size", "4", "--tasks", "6",
                           "--steps-per-task", "1200", "--num-envs", "3", "--episode-length", "20", "--seed", "1",
                           "--noise-end", "0.0", "--noise-decay-fraction", "0.5", *QUIET, "--out", str(out))
    assert code == 0, err
    meta, rows = _meta(out), _read(out)
    assert meta["source"]["algorithm"] == "noise" and "key" in rows
    for task, info in meta["tasks"].items():
        pick = rows["task"] == task
        key, door = info["key"][0] * 4 + info["key"][1], info["door"][0] * 4 + info["door"][1]
        greedy = np.where(rows["key"][pick], shortest_path_actions(4, door)[rows["state"][pick]],
                          shortest_path_actions(4, key)[rows["state"][pick]])
        level = epsilon_schedule(20, 1.0, 0.0, 0.5)[rows["update"][pick]]
        prob = (1 - level) * (rows["action"][pick] == greedy) + level / 5
        assert np.allclose(rows["logprob"][pick], np.log(prob), atol=1e-6)
    late = rows["episode"] >= 10  # epsilon 0 from the middle of each history: the demonstrator scores 2
    episodes = {}
    for t, s, e, r in zip(rows["task"][late], rows["stream"][late], rows["episode"][late], rows["reward"][late]):
        episodes[(t, s, e)] = episodes.get((t, s, e), 0.0) + r
    assert set(episodes.values()) == {2.0}


def test_bandit_noise_pulls_the_best_arm_epsilon_greedily(tmp_path, capsys):
    out = tmp_path / "bandit"
    code, err, _ = run_cli(capsys, "generate", "bandit", "--source", "noise", "--instances", "8", "--pulls", "50",
                           "--max-return-fraction", "0.99", "--progress", "false", "--out", str(out))
    assert code == 0, err
    meta, rows = _meta(out), _read(out)
    assert meta["source"]["algorithm"] == "noise"
    for unit in meta["units"].values():
        info, pick = unit["info"], rows["task"] == unit["task"]
        means = np.array(info["means"])
        eps = epsilon_schedule(50, floor=info["noise_floor"])[rows["update"][pick]]
        prob = (1 - eps) * (rows["action"][pick] == means.argmax()) + eps / 5
        assert np.allclose(rows["logprob"][pick], np.log(prob), atol=1e-6)
        assert info["expected_best_fraction"] <= 0.99 + 1e-6


def test_resume_after_an_interrupt_writes_every_row_once(tmp_path, capsys, monkeypatch):
    import tasks.grid.noise as noise_generate

    whole, argv = _darkroom(tmp_path, "whole")
    assert run_cli(capsys, *argv)[0] == 0
    out, argv = _darkroom(tmp_path, "resumed")
    calls, real = [0], noise_generate.return_record

    def interrupt_at_the_fifth(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(noise_generate, "return_record", interrupt_at_the_fifth)
    assert run_cli(capsys, *argv)[0] == 130
    assert len(_meta(out)["units"]) == 4  # the units committed before the interrupt stay
    monkeypatch.setattr(noise_generate, "return_record", real)
    code, err, printed = run_cli(capsys, *argv)
    assert code == 0 and "resuming: 4 of 24 goals" in printed
    assert content_hash(out) == content_hash(whole)
    assert len(_read(out)["task"]) == len(_read(whole)["task"])


def test_other_sources_metadata_does_not_name_the_noise_options():
    from tasks.bandit.config import GenerateConfig as BanditConfig
    from tasks.bandit.generate import dataset_metadata as bandit_metadata
    from tasks.darkroom.config import GenerateConfig as DarkRoomConfig
    from tasks.darkroom.generate import dataset_metadata as darkroom_metadata
    from tasks.keydoor.config import GenerateConfig as KeyDoorConfig
    from tasks.keydoor.generate import dataset_metadata as keydoor_metadata

    darkroom = make_config(DarkRoomConfig, {"size": 3})
    keydoor = make_config(KeyDoorConfig, {"size": 3, "tasks": 2, "episode_length": 12})
    for config in (darkroom_metadata(darkroom, [(0, 0)])["source"]["config"],
                   keydoor_metadata(keydoor, keydoor.task_pairs())["source"]["config"],
                   bandit_metadata(make_config(BanditConfig, {"instances": 3}))["source"]["config"]):
        assert not {"noise_start", "max_return_fraction"} & set(config)
    assert "source" not in keydoor_metadata(keydoor, keydoor.task_pairs())["source"]["config"]


@pytest.mark.parametrize("family", ["darkroom", "keydoor", "bandit"])
@pytest.mark.parametrize("option,value,message", [
    ("--noise-start", "1.5", "--noise-start must be an epsilon in [0, 1]"),
    ("--noise-end", "-0.1", "--noise-end must be an epsilon in [0, 1]"),
    ("--noise-end", "nan", "--noise-end"),  # non-finite numbers: refused while parsing, naming the option
    ("--noise-power", "inf", "--noise-power"),
    ("--noise-decay-fraction", "0", "--noise-decay-fraction must be in (0, 1]"),
    ("--max-return-fraction", "0", "--max-return-fraction must be in (0, 1]"),
    ("--max-return-fraction", "1.5", "--max-return-fraction must be in (0, 1]"),
    ("--max-return-fraction", "nan", "--max-return-fraction")])
def test_bad_noise_options_are_one_error_line(tmp_path, capsys, family, option, value, message):
    out = tmp_path / "bad"
    code, err, _ = run_cli(capsys, "generate", family, "--source", "noise", option, value, "--out", str(out))
    assert code == 2 and message in err
    assert not out.exists()


def test_noise_end_above_start_and_an_unreachable_bandit_cap_are_refused(tmp_path, capsys):
    code, err, _ = run_cli(capsys, "generate", "darkroom", "--source", "noise", "--noise-start", "0.2",
                           "--noise-end", "0.5", "--out", str(tmp_path / "a"))
    assert code == 2 and "must not exceed --noise-start" in err
    out = tmp_path / "b"
    code, err, _ = run_cli(capsys, "generate", "bandit", "--source", "noise", "--instances", "20",
                           "--max-return-fraction", "0.5", "--progress", "false", "--out", str(out))
    assert code == 2 and "uniformly random actions already get" in err and "pass --max-return-fraction" in err
    assert not out.exists()
