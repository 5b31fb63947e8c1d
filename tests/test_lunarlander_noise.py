"""``ad generate lunarlander --source noise``: Gymnasium's heuristic lander, through each task's engine map, made
epsilon-greedy with epsilon falling over each history; every transition recorded with the noise level and the exact
log-probability, histories independent of the batch (resume), the PPO source's metadata unchanged, bad options."""
from __future__ import annotations

import numpy as np
import pytest
from gymnasium.envs.box2d.lunar_lander import heuristic

import tasks.lunarlander  # noqa: F401 -- registers the family and ad/LunarLander-v0
from ad.config import make_config
from ad.history import HistoryReader
from tasks.lunarlander.config import GenerateConfig
from tasks.lunarlander.env import LunarLanderTask
from tasks.lunarlander.generate import generate
from tasks.noise import epsilon_schedule
from tests.cli_run import run_cli
from tests.interrupted import assert_same_histories, interrupt_at_second_commit

TINY = {"source": "noise", "tasks": 3, "streams": 2, "episodes": 3, "swap_fraction": 1.0, "progress": False,
        "heldout_fraction": 0.34}


def tiny(out, **extra) -> GenerateConfig:
    return make_config(GenerateConfig, {**TINY, "out": str(out), **extra})


def demonstrator(task_kwargs: dict, states: np.ndarray) -> np.ndarray:
    """The heuristic's action in each state, as the agent's action that fires that engine on this task."""
    probe = LunarLanderTask()
    inverse = np.argsort(task_kwargs["action_map"])
    return np.array([inverse[heuristic(probe, s)] for s in states])


def test_noise_histories_fall_from_random_to_the_demonstrator_with_exact_logprobs(tmp_path):
    generate(tiny(tmp_path / "ll"))
    reader = HistoryReader(tmp_path / "ll")
    meta = reader.metadata
    assert meta["source"]["algorithm"] == "noise"
    assert "learning_rate" not in meta["source"]["config"]  # the PPO's options are not this source's
    eps = epsilon_schedule(3)  # 1, 0.5, 0
    for task, info in meta["tasks"].items():
        streams = list(reader.streams(tasks=[task]))
        assert len(streams) == 2
        for s in streams:
            c = s.columns
            episodes = np.unique(c["episode"])
            assert episodes.tolist() == [0, 1, 2]  # every stream plays exactly --episodes episodes
            np.testing.assert_array_equal(c["update"], c["episode"])  # update = the noise level that acted
            greedy = demonstrator(info["kwargs"], c["state"])
            level = eps[c["episode"]]
            want = np.log((1 - level) * (c["action"] == greedy) + level / 4)
            np.testing.assert_allclose(c["logprob"], want, rtol=1e-5)
            last = c["episode"] == 2  # epsilon 0: the demonstrator itself
            np.testing.assert_array_equal(c["action"][last], greedy[last])
            first = c["episode"] == 0  # epsilon 1: uniformly random, not the demonstrator
            assert (c["action"][first] != greedy[first]).any()


def test_the_demonstrator_lands_through_swapped_engines(tmp_path):
    """Noise 0 throughout: the heuristic, acting through each task's inverse engine map, lands (a wrong map crashes:
    the main engine would fire a side one)."""
    generate(tiny(tmp_path / "ll", tasks=2, streams=1, episodes=2, noise_start=0.0, wind_fraction=0.0))
    reader = HistoryReader(tmp_path / "ll")
    returns = [float(c["reward"][c["episode"] == e].sum()) for s in reader.streams() for c in [s.columns]
               for e in (0, 1)]
    assert all(m != [0, 1, 2, 3] for m in (t["kwargs"]["action_map"] for t in reader.metadata["tasks"].values()))
    assert np.mean(returns) > 200, returns


def test_the_same_command_gives_the_same_histories(tmp_path):
    generate(tiny(tmp_path / "a"))
    generate(tiny(tmp_path / "b"))
    a, b = HistoryReader(tmp_path / "a"), HistoryReader(tmp_path / "b")
    for task in a.metadata["tasks"]:
        for x, y in zip(a.streams(tasks=[task]), b.streams(tasks=[task]), strict=True):
            np.testing.assert_array_equal(x.columns["action"], y.columns["action"])
            np.testing.assert_array_equal(x.columns["state"], y.columns["state"])


def test_interrupted_noise_generation_resumes_with_the_same_histories(tmp_path, monkeypatch):
    full = tmp_path / "full"
    generate(tiny(full))
    interrupt_at_second_commit(monkeypatch, lambda: generate(tiny(tmp_path / "cut")))
    assert [u["task"] for u in HistoryReader(tmp_path / "cut").units()] == ["lunarlander-t0000"]
    assert generate(tiny(tmp_path / "cut"))["units_written"] == 2  # tasks 1, 2 now run without task 0
    assert_same_histories(HistoryReader(full), HistoryReader(tmp_path / "cut"), streams=2)  # tasks 1, 2 ran without 0


def test_the_ppo_source_metadata_holds_no_noise_options(tmp_path):
    generate(make_config(GenerateConfig, {"tasks": 2, "steps": 32, "streams": 2, "rollout": 16, "epochs": 1,
                                          "minibatches": 2, "hidden": 8, "progress": False, "out": str(tmp_path / "p")}))
    config = HistoryReader(tmp_path / "p").metadata["source"]["config"]
    assert not {"source", "episodes", "noise_start", "noise_end", "noise_decay_fraction", "noise_power",
                "max_return_fraction"} & set(config)
    assert config["learning_rate"] == 5e-4


@pytest.mark.parametrize("argv", [["--max-return-fraction", "0.5"], ["--episodes", "0"],
                                  ["--noise-end", "2"], ["--noise-start", "nan"]])
def test_bad_noise_options_are_one_error_line(capsys, tmp_path, argv):
    code, err, _ = run_cli(capsys, "generate", "lunarlander", "--source", "noise", "--out", str(tmp_path / "x"),
                           *argv)
    assert code == 2 and err.count("error:") == 1
    assert not (tmp_path / "x").exists()


def test_the_family_expert_actions_are_the_demonstrator_s(tmp_path):
    """DPT's targets on LunarLander: at noise 0 every recorded action is the family's expert action."""
    from ad.registry import optimal_actions

    generate(tiny(tmp_path / "ll", tasks=2, streams=1, episodes=1, noise_start=0.0))
    reader = HistoryReader(tmp_path / "ll")
    expert = optimal_actions("lunarlander")
    for s in reader.streams():
        got = expert(reader.metadata, s.task, s.columns)
        assert got.dtype == np.int64 and len(got) > 50
        np.testing.assert_array_equal(got, s.columns["action"])


def test_stepping_some_streams_is_the_vector_env_step_for_them():
    """step_streams steps (and same-step autoresets) exactly the live sub-envs, as the vector env's own step does;
    the others do not move."""
    from tasks.lunarlander.env import make_vector_env
    from tasks.lunarlander.noise_generate import step_streams

    tasks = [{"gravity": -9.0}, {"gravity": -6.0}]
    ours, theirs = make_vector_env(4, tasks), make_vector_env(4, tasks)
    obs, _ = ours.reset(seed=[1, 2, 3, 4])
    want, _ = theirs.reset(seed=[1, 2, 3, 4])
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(300):
        action = rng.integers(4, size=4)
        obs, reward, term, trunc = step_streams(ours, action, np.ones(4, bool), obs)
        want, want_reward, want_term, want_trunc, _ = theirs.step(action)
        np.testing.assert_array_equal(obs, want)
        np.testing.assert_array_equal(reward, want_reward)
        np.testing.assert_array_equal(term | trunc, want_term | want_trunc)
        ended += int((term | trunc).sum())
    assert ended > 0  # autoresets happened along the way
    frozen = obs.copy()
    obs, reward, term, trunc = step_streams(ours, np.zeros(4, np.int64), np.array([True, False, True, False]), obs)
    np.testing.assert_array_equal(obs[[1, 3]], frozen[[1, 3]])
    assert reward[[1, 3]].tolist() == [0.0, 0.0] and not (term | trunc)[[1, 3]].any()
