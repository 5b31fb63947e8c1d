"""`ad generate bandit` end to end on tiny settings: a readable dataset, its metadata, resuming, bad inputs."""
import importlib
import json

import numpy as np
import pytest

importlib.import_module("tasks.bandit")  # registers `ad generate bandit` (before its ad.plugins entry point exists)

from ad import cli  # noqa: E402
from ad.config import make_config  # noqa: E402
from ad.data import RLTrajectoryDataset  # noqa: E402
from ad.history import HistoryReader  # noqa: E402
from tasks.bandit import generate as gen_module  # noqa: E402
from tasks.bandit.config import GenerateConfig  # noqa: E402
from tasks.bandit.generate import generate  # noqa: E402
from tasks.bandit.instances import arm_means, expected_regret, pull_observations, task_name  # noqa: E402

TINY = {"instances": 12, "pulls": 40, "progress": False}


def _cfg(out, **kw):
    return make_config(GenerateConfig, {"out": str(out), **TINY, **kw})


@pytest.mark.parametrize("kind,source", [("bernoulli", "thompson"), ("gaussian", "ucb")])
def test_tiny_generate_writes_a_readable_dataset(tmp_path, kind, source):
    out = generate(_cfg(tmp_path / "d", kind=kind, source=source, arms=3, heldout_fraction=0.25, seed=4))
    reader = HistoryReader(out)
    meta = reader.metadata
    names = [task_name(kind, 3, i) for i in range(12)]
    assert reader.tasks() == names and reader.family == "bandit"
    assert sorted(meta["split"]["train"] + meta["split"]["heldout"]) == names and len(meta["split"]["heldout"]) == 3
    spec = meta["task_spec"]
    assert (spec["num_actions"], spec["episode_length"], spec["kind"]) == (3, 1, kind)
    assert (spec["num_states"], spec["state_dim"]) == ((7, 0) if kind == "bernoulli" else (0, 6))
    assert meta["source"]["algorithm"] == source and meta["seeds"]["run"] == 4
    for name in meta["split"]["heldout"]:
        assert meta["tasks"][name]["optimal_return"] == arm_means(kind, 3, int(name[-5:])).max()
    units = {u["task"]: u for u in reader.units()}
    for stream in reader.streams():
        c = stream.columns
        assert stream.run == 4 and stream.stream == 0 and len(c["action"]) == 40
        np.testing.assert_array_equal(c["update"], np.arange(40))
        np.testing.assert_array_equal(c["episode"], np.arange(40))
        assert (c["step"] == 0).all() and c["terminated"].all() and not c["truncated"].any()
        np.testing.assert_array_equal(c["state"][0], 0)  # before the first pull
        np.testing.assert_allclose(c["state"][1:], pull_observations(c["action"][:-1], c["reward"][:-1], 3, kind))
        means = arm_means(kind, 3, int(stream.task[-5:]))
        info = units[stream.task]["info"]
        np.testing.assert_allclose(info["means"], means)
        assert info["optimal_return"] == means.max()
        np.testing.assert_allclose(info["regret"], expected_regret(means[None], c["action"][None]).sum(), rtol=1e-9)
        if kind == "bernoulli":
            assert set(np.unique(c["reward"])) <= {0.0, 1.0} and np.isnan(c["logprob"]).all()
        else:
            assert (c["logprob"] == 0).all()
    summary = json.loads((out / "_run" / "summary.json").read_text())
    assert summary["instances"] == 12 and summary["source_regret"] < summary["random_regret"]
    windows = RLTrajectoryDataset(out, window=10)  # the RL format reads it as it is
    assert len(windows) == 12 * 31 and windows[0]["states"].shape == ((10,) if kind == "bernoulli" else (10, 6))


def test_constant_observation_dataset(tmp_path):
    out = generate(_cfg(tmp_path / "d", observation="none"))
    reader = HistoryReader(out)
    assert reader.spec.state.kind == "discrete" and reader.spec.state.n == 1
    assert all((s.columns["state"] == 0).all() for s in reader.streams())
    assert reader.metadata["task_spec"]["num_states"] == 1


def test_interrupted_run_resumes_to_the_same_histories(tmp_path, monkeypatch):
    """A unit's history depends on the seed, the settings and its block, not on what is already on disk."""
    monkeypatch.setattr(gen_module, "BLOCK", 3)  # 3 blocks of 3, 3 and 1 instances
    small = generate(_cfg(tmp_path / "small", instances=7))
    out = tmp_path / "resumed"
    real = gen_module.unit_columns
    calls = []

    def dying(*args):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(gen_module, "unit_columns", dying)
    with pytest.raises(KeyboardInterrupt):
        generate(_cfg(out, instances=7))
    assert len(HistoryReader(out).units()) == 4
    monkeypatch.setattr(gen_module, "unit_columns", real)
    generate(_cfg(out, instances=7))
    a, b = HistoryReader(small).streams(), HistoryReader(out).streams()
    assert [s.task for s in a] == [s.task for s in b] and len(b) == 7
    for x, y in zip(a, b):
        for col in ("action", "reward", "update"):
            np.testing.assert_array_equal(x.columns[col], y.columns[col])


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    return exit_info.value.code, capsys.readouterr().err


@pytest.mark.parametrize("flag,value,needle", [
    ("--arms", "1", "--arms"), ("--arms", "0", "--arms"), ("--pulls", "0", "--pulls"), ("--pulls", "-5", "--pulls"),
    ("--instances", "0", "--instances"), ("--heldout-fraction", "1.0", "--heldout-fraction"),
    ("--heldout-fraction", "nan", "--heldout-fraction"), ("--noise-std", "0", "--noise-std"),
    ("--noise-std", "inf", "--noise-std"), ("--ucb-c", "-1", "--ucb-c"), ("--kind", "poisson", "--kind"),
    ("--source", "a2c", "--source")])
def test_bad_values_are_refused_with_one_error_line(tmp_path, capsys, flag, value, needle):
    out = tmp_path / "d"
    code, err = _run(["generate", "bandit", "--out", str(out), flag, value, "--instances", "3", "--pulls", "5"]
                     if flag not in ("--instances", "--pulls") else
                     ["generate", "bandit", "--out", str(out), flag, value], capsys)
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
    assert code == 2 and len(lines) == 1 and "error:" in lines[0] and needle in lines[0], err
    assert "Traceback" not in err and not out.exists()


def test_cli_generate_then_other_settings_are_refused(tmp_path, capsys):
    out = tmp_path / "d"
    cli_args = ["generate", "bandit", "--out", str(out), "--instances", "4", "--pulls", "6", "--no-progress"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(cli_args)
    assert exit_info.value.code == 0 and len(HistoryReader(out).units()) == 4
    code, err = _run([*cli_args, "--arms", "6"], capsys)
    assert code == 2 and "different settings" in err
