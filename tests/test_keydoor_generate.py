"""`ad generate keydoor` on a 3x3 room: the dataset (observed cell + key column), metadata, batching-independent
histories, resume, the A2C learning the task, `ad eval`'s env, bad inputs."""
import json

import numpy as np
import pytest

from ad import cli
from ad.config import make_config
from ad.errors import UserError
from ad.history import HistoryReader, content_hash
from ad.history.summary import SUMMARY_COLUMNS, episode_returns
from ad.registry import env_factory
from tasks.keydoor.config import GenerateConfig
from tasks.keydoor.generate import generate
from tasks.keydoor.pairs import task_name

TINY = {"size": 3, "tasks": 6, "steps_per_task": 1500, "episode_length": 12, "hidden": 16, "progress": False,
        "heldout_fraction": 0.34, "learning_rate": 3e-3, "log_every": 10}


def _cfg(out, **kw):
    return make_config(GenerateConfig, {"out": str(out), **TINY, **kw})


def test_tiny_generate_writes_observed_cells_and_the_key_flag(tmp_path):
    out = generate(_cfg(tmp_path / "d", seed=2))
    reader = HistoryReader(out)
    meta = reader.metadata
    assert reader.family == "keydoor" and len(reader.tasks()) == 6
    assert sorted(meta["split"]["train"] + meta["split"]["heldout"]) == sorted(reader.tasks())
    assert len(meta["split"]["heldout"]) == 2
    spec = meta["task_spec"]
    assert (spec["num_states"], spec["num_actions"], spec["episode_length"]) == (9, 5, 12)
    assert reader.spec.state.n == 9
    for name in reader.tasks():
        info = meta["tasks"][name]
        assert task_name(3, (*info["key"], *info["door"])) == name and info["optimal_return"] == 2.0
    for stream in reader.streams():
        c = stream.columns
        key, door = (np.array(x) for x in (meta["tasks"][stream.task]["key"], meta["tasks"][stream.task]["door"]))
        assert c["state"].min() >= 0 and c["state"].max() < 9 and c["key"].dtype == bool
        starts = np.flatnonzero(c["step"] == 0)
        for a, b in zip(starts, list(starts[1:]) + [len(c["step"])]):
            # the key flag (of the state the action was taken in) is the key reward seen earlier in the episode
            got_key = np.cumsum(c["reward"][a:b]) > 0
            np.testing.assert_array_equal(c["key"][a:b][1:], got_key[:-1])
            assert not c["key"][a]
            assert c["reward"][a:b].sum() <= 2 and (c["terminated"][a:b].sum() == (c["reward"][a:b].sum() == 2))
        # rewards happen only on arriving at the key / at the door with it (next cell = the next row's state)
        nxt = c["state"][1:][~(c["terminated"] | c["truncated"])[:-1]]
        rew = c["reward"][:-1][~(c["terminated"] | c["truncated"])[:-1]]
        assert np.all(nxt[rew > 0] == key[0] * 3 + key[1])
    summary = json.loads((out / "_run" / "summary.json").read_text())
    assert summary["goals"] == 6 and (out / "_run" / "learning_curves.png").is_file()


def test_a_task_history_does_not_depend_on_its_batch_and_resumes(tmp_path, monkeypatch):
    whole = generate(_cfg(tmp_path / "whole", random_start=True))
    split = generate(_cfg(tmp_path / "split", random_start=True, goals_per_batch=4, background_writing=False))
    assert content_hash(whole) == content_hash(split)
    from tasks.grid import generate as grid_module

    real, calls = grid_module._train_batch, []

    def dying(cfg, goals, *args):
        calls.append(goals)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(cfg, goals, *args)

    monkeypatch.setattr(grid_module, "_train_batch", dying)
    with pytest.raises(KeyboardInterrupt):
        generate(_cfg(tmp_path / "resumed", random_start=True, goals_per_batch=4))
    assert [len(goals) for goals in calls] == [4, 2]
    generate(_cfg(tmp_path / "resumed", random_start=True, goals_per_batch=2))
    assert calls[2:] == [calls[1]]  # the resumed run trains only the 2 tasks the interruption lost
    assert content_hash(tmp_path / "resumed") == content_hash(whole)


def test_the_a2c_learns_key_then_door(tmp_path):
    out = generate(_cfg(tmp_path / "d", size=5, tasks=3, steps_per_task=30_000, episode_length=20, hidden=32,
                        learning_rate=1e-2, plots=False))
    returns = [episode_returns(s.columns) for s in HistoryReader(out).streams(columns=SUMMARY_COLUMNS)]
    first, last = (np.mean([r[sl].mean() for r in returns]) for sl in (slice(0, 20), slice(-20, None)))
    assert first < 0.6 and last > 1.7  # measured: 0.38 -> 1.89 (optimum 2)


def test_eval_env_of_the_dataset(tmp_path):
    out = generate(_cfg(tmp_path / "d"))
    meta = HistoryReader(out).metadata
    setup = env_factory("keydoor")(meta, meta["split"]["heldout"], 3)
    assert setup.env.num_envs == 6 and setup.env.episode_length == 12 and list(setup.optimal) == [2.0, 2.0]


@pytest.mark.parametrize("values", [{"heldout_fraction": 1.0}, {"heldout_fraction": float("nan")},
                                    {"pairs": ["0,0/0,0"]}, {"pairs": ["0,0/3,0"]}, {"learning_rate": float("inf")},
                                    {"steps_per_task": 0}, {"size": 1}, {"tasks": -1}])
def test_bad_options_are_user_errors(tmp_path, values):
    with pytest.raises(UserError):
        _cfg(tmp_path / "d", **values)


def test_cli_generate_runs_and_bad_input_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "keydoor", "--out", str(tmp_path / "d"), "--size", "3", "--tasks", "2",
                  "--steps-per-task", "300", "--episode-length", "6", "--progress", "false"])
    assert exit_info.value.code == 0 and len(HistoryReader(tmp_path / "d").units()) == 2
    for argv in (["--heldout-fraction", "1"], ["--pairs", "0,0/9,9"], ["--size", "1"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["generate", "keydoor", "--out", str(tmp_path / "e"), *argv])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and "error:" in err and "Traceback" not in err
    assert not (tmp_path / "e").exists()


def test_keydoor_is_a_configuration_of_the_grid_engine_not_of_darkroom():
    """Key-to-Door's source, env, noise source and optimum load the shared grid engine and no DarkRoom module."""
    import subprocess
    import sys

    code = ("import sys, tasks.keydoor, tasks.keydoor.generate, tasks.keydoor.noise_generate, tasks.keydoor.env, "
            "tasks.keydoor.vector_env, tasks.keydoor.optimal, tasks.keydoor.demo\n"
            "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('tasks.')}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out)
    assert "grid" in loaded and "darkroom" not in loaded
