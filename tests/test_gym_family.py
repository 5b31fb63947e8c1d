"""`ad generate gym`: any Gymnasium env + a Stable-Baselines3 algorithm over a task distribution, recorded."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ad import cli
from ad.history import HistoryReader, content_hash
from ad.registry import env_factory
from tasks.gym.task_file import load_tasks
from cli_run import run_cli

ALGO = ["--algo-kwargs", '{"n_steps": 32, "batch_size": 16, "n_epochs": 1}', "--steps", "64", "--no-progress"]




@pytest.fixture
def tasks_file(tmp_path) -> Path:
    path = tmp_path / "tasks.yaml"
    path.write_text("tasks:\n  - {sutton_barto_reward: false}\n  - {sutton_barto_reward: true}\n"
                    "  - {}\nreference_return: 500\n")
    return path


def test_generate_records_every_task_and_resumes_identically(tmp_path, capsys, tasks_file):
    out = tmp_path / "d"
    argv = ["generate", "gym", "--env", "CartPole-v1", "--tasks", str(tasks_file), "--out", str(out),
            "--heldout-fraction", "0.34", *ALGO]
    assert run_cli(capsys, *argv)[0] == 0
    reader = HistoryReader(out)
    meta = reader.metadata
    assert reader.family == "gym" and len(reader.tasks()) == 3 and reader.num_transitions() == 3 * 64
    assert meta["task_spec"]["env_id"] == "CartPole-v1" and meta["task_spec"]["episode_length"] == 500
    assert meta["task_spec"]["action_space"] == {"type": "Discrete", "n": 2, "start": 0}
    assert len(meta["split"]["heldout"]) == 1 and len(meta["split"]["train"]) == 2
    assert [t["kwargs"] for t in meta["tasks"].values()] == [{"sutton_barto_reward": False},
                                                             {"sutton_barto_reward": True}, {}]
    table = reader.table().to_pandas()
    assert set(table["update"]) == {0, 1} and np.isfinite(table["value"]).all()
    first = content_hash(out)
    assert run_cli(capsys, *argv)[0] == 0 and content_hash(out) == first  # resume: nothing redone
    again = tmp_path / "again"  # the same command elsewhere writes the same rows
    assert run_cli(capsys, *[a if a != str(out) else str(again) for a in argv])[0] == 0
    assert content_hash(again) == first


def test_a_killed_run_leaves_no_partial_unit_and_the_rerun_completes(tmp_path, capsys, tasks_file, monkeypatch):
    import tasks.gym.generate as generate

    out = tmp_path / "d"
    argv = ["generate", "gym", "--env", "CartPole-v1", "--tasks", str(tasks_file), "--out", str(out), *ALGO]
    real, calls = generate.make_algorithm, []

    def dying(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(generate, "make_algorithm", dying)
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        cli.main(argv)
    assert len(HistoryReader(out).tasks()) == 1
    monkeypatch.setattr(generate, "make_algorithm", real)
    assert run_cli(capsys, *argv)[0] == 0
    assert len(HistoryReader(out).tasks()) == 3


def test_sampled_tasks_depend_on_the_seed_only(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("sample:\n  count: 4\n  kwargs:\n    gravity: {uniform: [-11.0, -5.0]}\n"
                    "    turbulence: {choice: [0.5, 1.5]}\n    enable_wind: true\n")
    tasks, reference = load_tasks(str(path), seed=3)
    assert reference is None and len(tasks) == 4 and tasks == load_tasks(str(path), seed=3)[0]
    assert all(-11 <= t["gravity"] <= -5 and t["turbulence"] in (0.5, 1.5) and t["enable_wind"] for t in tasks)
    assert tasks != load_tasks(str(path), seed=4)[0]


@pytest.mark.parametrize("extra, expected", [
    (["--env", "NoSuchEnv-v0"], "NoSuchEnv"),
    (["--env", "CartPole-v1", "--algo", "sb3:TD3"], "sb3:PPO"),
    (["--env", "CartPole-v1", "--algo", "PPO"], "not supported"),
    (["--env", "CartPole-v1", "--algo-kwargs", '{"n_steps": NaN}'], "finite"),
    (["--env", "CartPole-v1", "--algo-kwargs", '{"no_such_argument": 1}'], "cannot be built"),
    (["--env", "CartPole-v1", "--algo", "sb3:SAC"], "cannot be built"),  # SAC cannot act in Discrete(2)
    (["--env", "CartPole-v1", "--steps", "0"], "--steps"),
])
def test_bad_input_is_one_error_line(tmp_path, capsys, extra, expected):
    code, err, _ = run_cli(capsys, "generate", "gym", "--out", str(tmp_path / "d"), "--steps", "64", "--no-progress",
                        *extra)
    assert code == 2 and expected in err


@pytest.mark.parametrize("content, expected", [
    ("tasks:\n  - {no_such_kwarg: 1}\n", "rejects the kwargs"),
    ("tasks: 3\n", "list of mappings"),
    ("sample:\n  count: 2\n  kwargs:\n    x: {normal: [0, 1]}\n", "uniform"),
    ("tasks:\n  - {x: .nan}\n", "finite"),
    ("neither: 1\n", "either"),
    (b"tasks:\n  - {x: \xff}\n", "UTF-8"),
])
def test_bad_tasks_file_is_named(tmp_path, capsys, content, expected):
    path = tmp_path / "tasks.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, err, _ = run_cli(capsys, "generate", "gym", "--env", "CartPole-v1", "--tasks", str(path), "--out",
                        str(tmp_path / "d"), *ALGO)
    assert code == 2 and expected in err and not (tmp_path / "d" / "dataset.json").exists()


def test_a_missing_package_is_named(tmp_path, capsys, monkeypatch):
    import gymnasium

    def missing(env_id, **kwargs):  # what gymnasium raises for LunarLander without Box2D
        raise gymnasium.error.DependencyNotInstalled('Box2D is not installed, run `pip install "gymnasium[box2d]"`')

    monkeypatch.setattr(gymnasium, "make", missing)
    code, err, _ = run_cli(capsys, "generate", "gym", "--env", "LunarLander-v3", "--out", str(tmp_path / "d"), *ALGO)
    assert code == 2 and "needs a package" in err and "gymnasium[box2d]" in err
    assert not (tmp_path / "d" / "dataset.json").exists()


def test_eval_env_rebuilds_the_held_out_tasks(tmp_path, capsys, tasks_file):
    out = tmp_path / "d"
    run_cli(capsys, "generate", "gym", "--env", "CartPole-v1", "--tasks", str(tasks_file), "--out", str(out), *ALGO)
    meta = HistoryReader(out).metadata
    names = list(meta["tasks"])
    setup = env_factory("gym")(meta, names[:2], envs_per_task=2)
    assert setup.env.num_envs == 4 and setup.num_actions == 2 and list(setup.optimal) == [500.0, 500.0]
    obs, _ = setup.env.reset(seed=0)
    assert obs.shape == (4, 4)
    _, rewards, *_ = setup.env.step(np.zeros(4, dtype=np.int64))
    assert rewards.tolist() == [1.0, 1.0, 0.0, 0.0]  # each task its kwargs: Sutton-Barto rewards are 0 until the end
    other = {**meta, "task_spec": {**meta["task_spec"], "action_space": {"type": "MultiDiscrete", "repr": "[2 3]"}}}
    with pytest.raises(Exception, match="Discrete or Box actions"):
        env_factory("gym")(other, names[:1])
