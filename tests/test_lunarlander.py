"""LunarLander family: task kwargs and their range checks, the vector env over tasks, the batched PPO learner,
``ad generate lunarlander`` (split and kwargs recorded, resume without duplicates) and the eval env."""
from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest
import torch

import tasks.lunarlander  # noqa: F401 -- registers the family and ad/LunarLander-v0
from ad.config import make_config
from ad.errors import UserError
from ad.history import HistoryReader
from tasks.lunarlander.config import GenerateConfig
from tasks.lunarlander.env import make_vector_env
from ad.registry import env_factory
from tasks.lunarlander.generate import generate
from tasks.lunarlander.instances import check_kwargs, sample_tasks
from tasks.lunarlander.ppo import BatchedPPO
from tests.cli_run import run_cli
from tests.interrupted import assert_same_histories, interrupt_at_second_commit

TINY = {"tasks": 3, "steps": 64, "streams": 2, "rollout": 16, "epochs": 1, "minibatches": 2, "hidden": 8,
        "progress": False, "heldout_fraction": 0.34}


def tiny(out, **extra) -> GenerateConfig:
    return make_config(GenerateConfig, {**TINY, "out": str(out), **extra})


def test_sampled_tasks_are_in_range_and_keyed_by_seed_and_index():
    a = sample_tasks(6, 3, (-11.0, -5.0), 0.5, (0.0, 15.0), (0.0, 1.5))
    b = sample_tasks(3, 3, (-11.0, -5.0), 0.5, (0.0, 15.0), (0.0, 1.5))
    assert a[:3] == b  # task i's draw does not depend on the number of tasks
    assert all(-11.0 <= t["gravity"] <= -5.0 for t in a)
    assert any(t["enable_wind"] for t in a) and all(0 <= t.get("wind_power", 0) <= 15 for t in a)


def test_swapped_engines_take_the_mapped_action_and_are_drawn_only_when_asked():
    plain = sample_tasks(8, 3, (-11.0, -5.0), 0.5, (0.0, 15.0), (0.0, 1.5))
    assert sample_tasks(8, 3, (-11.0, -5.0), 0.5, (0.0, 15.0), (0.0, 1.5), swap_fraction=0.0) == plain
    swapped = sample_tasks(8, 3, (-11.0, -5.0), 0.5, (0.0, 15.0), (0.0, 1.5), swap_fraction=1.0)
    for a, b in zip(plain, swapped):  # the same physics, every engine map a non-identity permutation
        assert {k: v for k, v in b.items() if k != "action_map"} == a
        assert b["action_map"][0] == 0 and sorted(b["action_map"]) == [0, 1, 2, 3] and b["action_map"] != [0, 1, 2, 3]
    one = gymnasium.make("ad/LunarLander-v0", gravity=-8.0, action_map=[0, 3, 1, 2])
    ref = gymnasium.make("ad/LunarLander-v0", gravity=-8.0)
    one.reset(seed=5)
    ref.reset(seed=5)
    for action in [1, 2, 3, 0, 2, 2, 1]:
        np.testing.assert_array_equal(one.step(action)[0], ref.step([0, 3, 1, 2][action])[0])


@pytest.mark.parametrize("bad", [[0, 1, 2], [1, 0, 2, 2], "0123", [0, 1, 2, True]])
def test_an_action_map_that_is_not_a_permutation_is_a_user_error(bad):
    with pytest.raises(UserError, match="action_map must be a permutation"):
        check_kwargs({"action_map": bad})


@pytest.mark.parametrize("kwargs", [{"gravity": 0.0}, {"gravity": -12.0}, {"gravity": 1.5}, {"gravity": float("nan")},
                                    {"wind_power": 21.0}, {"turbulence_power": -0.1},
                                    {"wind_power": float("inf")}, {"enable_wind": "yes"}, {"mass": 2.0}])
def test_bad_kwargs_are_user_errors(kwargs):
    with pytest.raises(UserError):
        check_kwargs(kwargs)
    with pytest.raises(UserError):
        gymnasium.make("ad/LunarLander-v0", **kwargs)


def test_vector_env_plays_each_task_with_its_kwargs():
    tasks = [{"gravity": -4.0}, {"gravity": -11.0, "enable_wind": True, "wind_power": 5.0}]
    env = make_vector_env(4, tasks)
    try:
        obs, _ = env.reset(seed=1)
        assert obs.shape == (4, 8)
        gravities = [e.unwrapped.world.gravity[1] for e in env.envs]
        assert gravities == pytest.approx([-4.0, -4.0, -11.0, -11.0])
        for _ in range(3):
            obs, reward, term, trunc, _ = env.step(np.array([0, 1, 2, 3]))
        assert obs.shape == (4, 8) and reward.shape == (4,)
    finally:
        env.close()
    with pytest.raises(UserError):
        make_vector_env(3, tasks)


def _rollout(learner: BatchedPPO, T: int, E: int, R: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(R, T, E, 8)).astype(np.float32)
    u = learner.uniforms(R, E)
    acts = [learner.act(obs[t], u[t]) for t in range(R)]
    return {"obs": obs, "action": np.stack([a[0] for a in acts]), "logprob": np.stack([a[1] for a in acts]),
            "value": np.stack([a[2] for a in acts]), "reward": rng.normal(size=(R, T, E)).astype(np.float32),
            "done": rng.random((R, T, E)) < 0.1}


def test_batched_learner_update_changes_parameters_and_keeps_tasks_independent():
    cfg = tiny("unused")
    both, alone = BatchedPPO(cfg, [5, 9], 8, 4), BatchedPPO(cfg, [9], 8, 4)
    before = [p.detach().clone() for p in both.params]
    rollout = _rollout(both, 2, 2, 16)
    both.update(rollout, np.zeros((2, 2), np.float32))
    assert both.updates == cfg.epochs * cfg.minibatches
    assert all(not torch.equal(a, b) for a, b in zip(before, both.params))
    # task seeded 9 learns the same alone as beside task 5, from the same data
    alone_rollout = {k: v[:, 1:] for k, v in rollout.items()}
    assert torch.equal(alone.params[0][0], before[0][1])
    alone.uniforms(16, 2)  # the same draws as the batch's task 1 made
    alone.update(alone_rollout, np.zeros((1, 2), np.float32))
    for a, b in zip(alone.params, both.params):
        torch.testing.assert_close(a[0], b[1])


def test_generate_records_split_kwargs_and_every_transition(tmp_path):
    summary = generate(tiny(tmp_path / "ll"))
    reader = HistoryReader(tmp_path / "ll")
    meta = reader.metadata
    assert meta["split"] == {"train": ["lunarlander-t0000", "lunarlander-t0001"], "heldout": ["lunarlander-t0002"]}
    assert meta["task_spec"]["env_id"] == "ad/LunarLander-v0"
    assert meta["task_spec"]["action_space"]["n"] == 4
    assert set(meta["tasks"]) == {"lunarlander-t0000", "lunarlander-t0001", "lunarlander-t0002"}
    assert summary["units_written"] == 3
    rows = list(reader.streams(tasks=["lunarlander-t0001"]))
    assert len(rows) == 2 and all(len(s.columns["reward"]) == 64 // 2 for s in rows)
    setup = env_factory("lunarlander")(meta, meta["split"]["heldout"], envs_per_task=2)
    assert setup.env.num_envs == 2 and setup.num_actions == 4 and setup.optimal.tolist() == [200.0]
    want = meta["tasks"]["lunarlander-t0002"]["kwargs"]["gravity"]
    assert setup.env.envs[0].unwrapped.world.gravity[1] == pytest.approx(want)


def test_interrupted_generation_resumes_without_duplicates(tmp_path, monkeypatch):
    full = tmp_path / "full"
    generate(tiny(full))
    interrupt_at_second_commit(monkeypatch, lambda: generate(tiny(tmp_path / "cut")))
    assert [u["task"] for u in HistoryReader(tmp_path / "cut").units()] == ["lunarlander-t0000"]
    assert generate(tiny(tmp_path / "cut"))["units_written"] == 2
    assert_same_histories(HistoryReader(full), HistoryReader(tmp_path / "cut"), streams=2)  # tasks 1, 2 ran without 0


@pytest.mark.parametrize("argv", [["--gravity-low", "-12"], ["--gravity-high", "0"], ["--gravity-low", "nan"],
                                  ["--wind-power-max", "25"], ["--turbulence-power-max", "3"],
                                  ["--turbulence-power-max", "inf"], ["--learning-rate", "nan"], ["--tasks", "0"]])
def test_bad_options_are_one_error_line(capsys, tmp_path, argv):
    code, err, _ = run_cli(capsys, "generate", "lunarlander", "--out", str(tmp_path / "x"), *argv)
    assert code == 2 and "error:" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_demo_runs_end_to_end(capsys, tmp_path):
    code, _, _ = run_cli(capsys, "demo", "--task", "lunarlander", "--out", str(tmp_path / "demo"), "--tasks", "4",
                         "--steps", "1024", "--streams", "2", "--ad-steps", "3", "--ed-steps", "3", "--episodes", "2",
                         "--context", "32", "--subsample", "1")
    assert code == 0
    assert {"AD", "ED", "random", "source"} <= set(json.loads(
        (tmp_path / "demo" / "eval" / "eval.json").read_text())["policies"])
    assert (tmp_path / "demo" / "report.md").is_file()
