"""The nearest-unvisited explorer source (`tasks.darkroom.explorer`) and `ad generate darkroom --source explorer`."""
from __future__ import annotations

import json

import numpy as np
import pytest

from ad.config import make_config
from ad.errors import UserError
from ad.history import HistoryReader
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.env import DarkRoomEnv
from tasks.darkroom.explorer import explore_goal
from tasks.darkroom.generate import generate
from tasks.darkroom.goals import all_goals, optimal_return, task_name


def _streams(columns: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    return [{k: v[columns["stream"] == s] for k, v in columns.items()} for s in np.unique(columns["stream"])]


@pytest.mark.parametrize("terminate_on_goal, random_start", [(False, False), (True, False), (False, True)])
def test_histories_replay_exactly_in_the_gymnasium_env(terminate_on_goal, random_start):
    size, goal = 5, (0, 4)
    columns, returns = explore_goal(size, goal, streams=3, episodes=6, episode_length=12, epsilon=0.2,
                                    epsilon_after_goal=0.1, seed=3, random_start=random_start,
                                    terminate_on_goal=terminate_on_goal)
    env = DarkRoomEnv(size=size, goal=goal, terminate_on_goal=terminate_on_goal)
    for s, stream in enumerate(_streams(columns)):
        starts = np.flatnonzero(stream["step"] == 0)
        assert len(starts) == 6 and (stream["episode"][starts] == np.arange(6)).all()
        for e, (lo, hi) in enumerate(zip(starts, list(starts[1:]) + [len(stream["step"])])):
            env.reset()
            env.cell = int(stream["state"][lo])  # the recorded start (the centre unless random_start)
            total = 0.0
            for i in range(lo, hi):
                assert stream["state"][i] == env.cell
                cell, reward, terminated, _, _ = env.step(int(stream["action"][i]))
                assert stream["reward"][i] == reward and stream["terminated"][i] == terminated
                total += reward
            assert total == returns[s, e]
            assert stream["terminated"][hi - 1] or stream["truncated"][hi - 1]  # every episode ends flagged
            assert not (stream["terminated"][lo:hi - 1] | stream["truncated"][lo:hi - 1]).any()
            if not random_start:
                assert stream["state"][lo] == 2 * size + 2


def test_without_noise_it_finds_every_goal_within_a_few_episodes_and_then_goes_straight_there():
    size, length = 9, 20
    for goal in all_goals(size):
        _, returns = explore_goal(size, goal, streams=4, episodes=12, episode_length=length, epsilon=0.0,
                                  epsilon_after_goal=0.0, seed=0)
        found = (returns > 0).argmax(axis=1)  # (streams,) first rewarded episode
        assert (returns > 0).any(axis=1).all() and found.max() <= 5  # 80 cells, 20-step episodes: a search, not a walk
        best = optimal_return(size, goal, length, terminate_on_goal=False)
        for s, first in enumerate(found):
            assert (returns[s, first + 1:] == best).all()  # every later episode is optimal


def test_logprobs_are_the_explorers_exact_action_probabilities():
    columns, _ = explore_goal(7, (6, 6), streams=2, episodes=4, episode_length=20, epsilon=1.0, epsilon_after_goal=1.0,
                              seed=1)
    np.testing.assert_allclose(columns["logprob"], np.log(0.2), rtol=1e-6)  # uniformly random actions
    columns, _ = explore_goal(7, (6, 6), streams=2, episodes=4, episode_length=20, epsilon=0.0, epsilon_after_goal=0.0,
                              seed=1)
    p = np.exp(columns["logprob"].astype(np.float64))
    # a greedy move is one of the 1 or 2 moves that get closer to the target (or noop at it): probability 1 or 1/2
    assert set(np.round(p, 6)) <= {1.0, 0.5}
    assert np.isclose(p, 0.5).any() and np.isclose(p, 1.0).any()


def test_a_goals_histories_depend_on_the_seed_and_goal_only():
    a, _ = explore_goal(5, (1, 1), 3, 5, 10, 0.1, 0.02, seed=7)
    b, _ = explore_goal(5, (1, 1), 3, 5, 10, 0.1, 0.02, seed=7)
    c, _ = explore_goal(5, (1, 1), 3, 5, 10, 0.1, 0.02, seed=8)
    assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    assert not np.array_equal(a["action"], c["action"])


def _config(out, **values):
    return make_config(GenerateConfig, {"out": str(out), "size": 5, "source": "explorer", "steps_per_goal": 1000,
                                        "terminate_on_goal": False, "progress": False, "seed": 2, **values})


def test_generate_writes_the_a2c_layout_split_and_metadata_and_resumes(tmp_path):
    path = generate(_config(tmp_path / "d"))
    reader = HistoryReader(path)
    meta = reader.metadata
    assert meta["source"]["algorithm"] == "explorer" and meta["source"]["config"]["episodes_per_stream"] == 5
    a2c = make_config(GenerateConfig, {"out": str(tmp_path / "a"), "size": 5, "seed": 2, "terminate_on_goal": False})
    from tasks.darkroom.generate import dataset_metadata

    reference = dataset_metadata(a2c, all_goals(5))
    assert meta["split"] == reference["split"] and meta["tasks"] == reference["tasks"]
    assert meta["task_spec"] == reference["task_spec"]
    units = reader.units()
    assert len(units) == 24 and {u["run"] for u in units} == {2}
    stream = reader.streams([task_name(5, (0, 0))], columns=["episode", "step", "state", "action", "logprob"])
    assert len(stream) == 10 and all(len(s.columns["step"]) == 100 for s in stream)  # 5 episodes of 20 steps
    summary = json.loads((path / "_run" / "summary.json").read_text())
    assert summary["goals"] == 24 and summary["source"] == "explorer"
    before = {p: p.read_bytes() for p in path.rglob("*.parquet")}
    generate(_config(tmp_path / "d"))  # resuming: nothing to do, nothing rewritten
    assert {p: p.read_bytes() for p in path.rglob("*.parquet")} == before


def test_generate_with_fewer_goals_writes_the_same_histories_for_them(tmp_path):
    whole = HistoryReader(generate(_config(tmp_path / "all")))
    part = HistoryReader(generate(_config(tmp_path / "part", goals=["0,0", "4,4"])))
    for goal in ((0, 0), (4, 4)):
        name = task_name(5, goal)
        x, y = whole.streams([name], columns=["state", "action"]), part.streams([name], columns=["state", "action"])
        assert all(np.array_equal(a.columns[k], b.columns[k]) for a, b in zip(x, y) for k in ("state", "action"))


@pytest.mark.parametrize("values, message", [({"epsilon": 1.5}, "--epsilon"), ({"epsilon": float("nan")}, "--epsilon"),
                                             ({"epsilon_after_goal": -0.1}, "--epsilon-after-goal"),
                                             ({"source": "dqn"}, "source")])
def test_bad_explorer_options_are_user_errors(tmp_path, values, message):
    with pytest.raises(UserError, match=message):
        _config(tmp_path / "d", **values)
    assert not (tmp_path / "d").exists()


def test_explorer_runs_in_process_only(tmp_path):
    with pytest.raises(UserError, match="--source explorer runs in this process"):
        generate(_config(tmp_path / "d", backend="ray"))


def test_the_source_curve_of_short_histories_covers_the_episodes_they_have(tmp_path):
    from ad.evaluate import source_curve

    reader = HistoryReader(generate(_config(tmp_path / "d")))  # 5 episodes per stream
    tasks = reader.metadata["split"]["heldout"]
    curve = source_curve(reader, tasks, episodes=100)
    assert curve.returns.shape == (len(tasks), 10, 5) and curve.normalised_curve().shape == (5,)
    assert source_curve(reader, tasks, episodes=3).returns.shape == (len(tasks), 10, 3)


def test_tiny_darkroom_demo_distils_the_explorer_end_to_end(tmp_path):
    import contextlib
    import io

    import yaml

    from ad.demo import run_ad_demo
    from tasks.darkroom.demo import DarkRoomDemoConfig

    config = make_config(DarkRoomDemoConfig, {
        "out": str(tmp_path / "demo"), "size": 5, "seed": 1, "streams": 10, "steps_per_goal": 2000, "ad_steps": 3,
        "ed_steps": 2, "episodes": 12, "seeds": 1,
        "train_overrides": {"n_embd": 16, "n_head": 2, "n_ff": 32, "warmup_steps": 1, "progress": False,
                            "batch_size": 2}})
    with contextlib.redirect_stdout(io.StringIO()):
        run_ad_demo(config)
    out = tmp_path / "demo"
    meta = json.loads((out / "darkroom" / "dataset.json").read_text())
    assert meta["source"]["algorithm"] == "explorer" and meta["source"]["config"]["episodes_per_stream"] == 10
    summary = json.loads((out / "eval" / "eval.json").read_text())
    assert summary["tasks"] == meta["split"]["heldout"]
    assert set(summary["policies"]) == {"AD", "ED", "random", "source"}
    assert len(summary["policies"]["source"]["normalised"]) == 10  # the source's histories end at 10 episodes
    ad_cfg = yaml.safe_load((out / "ad" / "config.yaml").read_text())
    ed_cfg = yaml.safe_load((out / "ed" / "config.yaml").read_text())
    assert (ad_cfg["context"], ad_cfg["subsample"], ed_cfg["context"]) == (200, 1, 20)  # ED: 1 expert episode
