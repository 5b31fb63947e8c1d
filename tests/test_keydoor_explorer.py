"""The grid explorer on Key-to-Door (`tasks.keydoor.explorer`) and `ad generate keydoor --source explorer`."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from ad.config import make_config
from ad.errors import UserError
from ad.history import HistoryReader
from tasks.keydoor.config import GenerateConfig
from tasks.keydoor.env import KeyDoorEnv
from tasks.keydoor.explorer import run_pair
from tasks.keydoor.generate import dataset_metadata, generate
from tasks.keydoor.pairs import all_pairs, steps_needed, task_name


def _cfg(**values):
    return SimpleNamespace(**{"size": 5, "seed": 0, "num_envs": 3, "episode_length": 30, "epsilon": 0.2,
                              "epsilon_after_goal": 0.1, "random_start": False, **values})


def _streams(columns: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    return [{k: v[columns["stream"] == s] for k, v in columns.items()} for s in np.unique(columns["stream"])]


@pytest.mark.parametrize("pair, random_start", [((0, 4, 4, 0), False), ((2, 2, 0, 0), False), ((1, 3, 3, 1), True)])
def test_histories_replay_exactly_in_the_gymnasium_env(pair, random_start):
    """States, rewards, the key flag and the episode ends are those of KeyDoorEnv given the recorded actions (a key
    on the start cell, (2, 2), included: picked up by a step onto it, never by standing there at the start)."""
    columns, returns = run_pair(_cfg(random_start=random_start), pair, 8)
    env = KeyDoorEnv(size=5, pair=pair)
    for s, stream in enumerate(_streams(columns)):
        starts = np.flatnonzero(stream["step"] == 0)
        assert len(starts) == 8 and (stream["episode"][starts] == np.arange(8)).all()
        for e, (lo, hi) in enumerate(zip(starts, list(starts[1:]) + [len(stream["step"])])):
            env.reset()
            env.cell = int(stream["state"][lo])
            total = 0.0
            for i in range(lo, hi):
                assert stream["state"][i] == env.cell and stream["key"][i] == env.has_key
                _, reward, terminated, _, _ = env.step(int(stream["action"][i]))
                assert stream["reward"][i] == reward and stream["terminated"][i] == terminated
                total += reward
            assert total == returns[s, e]
            assert stream["terminated"][hi - 1] or stream["truncated"][hi - 1]
            assert not (stream["terminated"][lo:hi - 1] | stream["truncated"][lo:hi - 1]).any()


def test_without_noise_it_finds_both_cells_and_then_takes_the_shortest_path():
    """On every pair of a 5x5 room: both found within a few 30-step episodes, then every later episode scores 2 in
    the fewest steps, and once the key is known every later episode collects it."""
    cfg = _cfg(epsilon=0.0, epsilon_after_goal=0.0, num_envs=2)
    for pair in all_pairs(5)[::7]:
        columns, returns = run_pair(cfg, pair, 8)
        both = returns == 2
        assert both.any(axis=1).all() and both.argmax(axis=1).max() <= 3
        key_found = (returns >= 1).argmax(axis=1)
        for s, stream in enumerate(_streams(columns)):
            first = both[s].argmax()
            assert both[s, first:].all() and (returns[s, key_found[s]:] >= 1).all()
            lengths = np.bincount(stream["episode"])
            assert (lengths[first + 1:] == steps_needed(5, pair)).all()


def test_the_search_goes_on_across_episodes_where_it_stopped():
    """Key next to the start, door in the far corner of a 7x7 room, 12-step episodes: the explorer remembers the
    cells it searched (with and without the key) and the cells it found, so every stream opens the door within 9
    episodes and in every episode after it. (The same explorer starting its search afresh every episode opens it in
    fewer than half its streams within 12 episodes.)"""
    cfg = _cfg(size=7, epsilon=0.0, epsilon_after_goal=0.0, num_envs=20, episode_length=12)
    _, returns = run_pair(cfg, (3, 4, 6, 6), 12)
    both, key = returns == 2, returns >= 1
    assert both.any(axis=1).all() and both.argmax(axis=1).max() <= 8
    for s in range(20):
        assert both[s, both[s].argmax():].all() and key[s, key[s].argmax():].all()


def test_logprobs_are_exact_and_histories_depend_on_the_seed_and_pair_only():
    columns, _ = run_pair(_cfg(epsilon=1.0, epsilon_after_goal=1.0), (0, 0, 4, 4), 3)
    np.testing.assert_allclose(columns["logprob"], np.log(0.2), rtol=1e-6)
    a, _ = run_pair(_cfg(), (1, 1, 3, 3), 4)
    b, _ = run_pair(_cfg(), (1, 1, 3, 3), 4)
    c, _ = run_pair(_cfg(seed=1), (1, 1, 3, 3), 4)
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["action"], c["action"])


def _config(out, **values):
    return make_config(GenerateConfig, {"out": str(out), "size": 5, "tasks": 12, "source": "explorer",
                                        "steps_per_task": 900, "num_envs": 3, "episode_length": 30,
                                        "heldout_fraction": 0.25, "progress": False, "seed": 2, **values})


def test_generate_writes_the_a2c_layout_split_and_metadata_and_resumes(tmp_path):
    cfg = _config(tmp_path / "d")
    path = generate(cfg)
    reader = HistoryReader(path)
    meta = reader.metadata
    assert meta["source"]["algorithm"] == "explorer" and meta["source"]["config"]["episodes_per_stream"] == 10
    assert meta["source"]["config"]["epsilon"] == 0.1
    a2c = make_config(GenerateConfig, {"out": str(tmp_path / "a"), "size": 5, "tasks": 12, "seed": 2,
                                       "episode_length": 30, "heldout_fraction": 0.25, "num_envs": 3})
    reference = dataset_metadata(a2c, a2c.task_pairs())
    assert meta["split"] == reference["split"] and meta["tasks"] == reference["tasks"]
    assert "epsilon" not in reference["source"]["config"]  # the A2C's metadata stays what it was
    pair = cfg.task_pairs()[0]
    streams = reader.streams([task_name(5, pair)], columns=["episode", "state", "action", "reward", "key"])
    assert len(streams) == 3
    expected, _ = run_pair(cfg, pair, 10)
    for s, stream in enumerate(streams):
        for name in ("state", "action", "reward", "key"):
            assert np.array_equal(stream.columns[name], expected[name][expected["stream"] == s])
    summary = json.loads((path / "_run" / "summary.json").read_text())
    assert summary["goals"] == 12 and summary["source"] == "explorer" and summary["learned_goals"] == 12
    before = {p: p.read_bytes() for p in path.rglob("*.parquet")}
    generate(_config(tmp_path / "d"))  # resuming: nothing to do, nothing rewritten
    assert {p: p.read_bytes() for p in path.rglob("*.parquet")} == before


@pytest.mark.parametrize("values, message", [({"epsilon": 1.5}, "--epsilon"),
                                             ({"epsilon_after_goal": float("nan")}, "--epsilon-after-goal"),
                                             ({"backend": "ray"}, "--source explorer runs in this process")])
def test_bad_options_are_user_errors_before_anything_is_written(tmp_path, values, message):
    with pytest.raises(UserError, match=message):
        generate(_config(tmp_path / "d", **values))
    assert not (tmp_path / "d").exists()
