"""`ad generate darkroom` end to end on a 3x3 grid: dataset, metadata, resume, bad inputs."""
import json

import numpy as np
import pytest

from ad import cli
from ad.config import make_config
from ad.errors import UserError
from ad.history import HistoryReader, HistorySpec, ColumnSpec, HistoryWriter
from ad.history.hashing import content_hash
from ad.history.unit import UnitWriter
from tasks.grid import generate as gen_module
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.generate import generate

TINY = {"size": 3, "steps_per_goal": 2000, "hidden": 16, "progress": False, "tensorboard": False,
        "plots": False, "log_every": 10}


def _cfg(out, **kw):
    return make_config(GenerateConfig, {"out": str(out), **TINY, **kw})


def test_tiny_generate_writes_a_readable_dataset(tmp_path):
    out = generate(_cfg(tmp_path / "d", plots=True, tensorboard=True, gif_goals=2))
    reader = HistoryReader(out)
    meta = reader.metadata
    names = [f"darkroom3-g{r}-{c}" for r in range(3) for c in range(3) if (r, c) != (1, 1)]
    assert sorted(reader.tasks()) == sorted(names)
    assert sorted(meta["split"]["train"] + meta["split"]["heldout"]) == sorted(names)
    assert len(meta["split"]["heldout"]) == 2
    assert meta["tasks"]["darkroom3-g0-0"]["goal"] == [0, 0]
    assert meta["tasks"]["darkroom3-g0-0"]["optimal_return"] == 1.0  # terminate_on_goal by default
    assert meta["task_spec"]["size"] == 3 and meta["source"]["algorithm"] == "a2c"
    streams = reader.streams(tasks=["darkroom3-g0-0"])
    assert len(streams) == 10 and all(len(s.columns["step"]) == 200 for s in streams)
    for s in streams:
        c = s.columns
        assert np.all(np.diff(c["update"]) >= 0) and c["update"][-1] == 19
        new_episode = np.diff(c["episode"]) == 1
        ended = (c["terminated"] | c["truncated"])[:-1]
        np.testing.assert_array_equal(new_episode, ended)  # episodes advance exactly after an end
        np.testing.assert_array_equal(c["step"][1:][ended], 0)
        np.testing.assert_array_equal(c["step"][1:][~ended], c["step"][:-1][~ended] + 1)
        assert np.all(c["reward"][c["terminated"]] == 1.0) and np.all(c["logprob"] <= 0)
        goal_hits = c["reward"] == 1.0
        assert np.all(c["terminated"][goal_hits])
    run = out / "_run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["goals"] == 8 and 0 <= summary["learned_fraction"] <= 1
    assert (run / "learning_curves.png").stat().st_size > 0 and (run / "greedy_policy.gif").stat().st_size > 0
    assert any((run / "tb").iterdir())


def test_interrupted_run_resumes_without_duplicates(tmp_path, monkeypatch):
    full = generate(_cfg(tmp_path / "full", goals_per_batch=3))
    out = tmp_path / "resumed"
    real_train = gen_module._train_batch
    calls = []

    def dying_train(cfg, goals, *args):
        calls.append(goals)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_train(cfg, goals, *args)

    monkeypatch.setattr(gen_module, "_train_batch", dying_train)
    with pytest.raises(KeyboardInterrupt):
        generate(_cfg(out, goals_per_batch=3))
    assert len(HistoryReader(out).units()) == 3  # first batch committed, the rest invisible
    monkeypatch.setattr(gen_module, "_train_batch", real_train)
    generate(_cfg(out, goals_per_batch=3))
    resumed, reference = HistoryReader(out), HistoryReader(full)
    assert len(resumed.units()) == 8 and resumed.num_transitions() == 8 * 2000
    cols = ["task", "stream", "update", "episode", "step", "state", "action", "reward", "logprob"]
    a = resumed.table(columns=cols).to_pandas().sort_values(["task", "stream", "update", "step"], kind="stable")
    b = reference.table(columns=cols).to_pandas().sort_values(["task", "stream", "update", "step"], kind="stable")
    assert a.duplicated(["task", "stream", "update", "step", "episode"]).sum() == 0
    np.testing.assert_array_equal(a["action"].to_numpy(), b["action"].to_numpy())  # deterministic rerun
    np.testing.assert_allclose(a["logprob"].to_numpy(), b["logprob"].to_numpy(), rtol=1e-5, atol=1e-6)
    generate(_cfg(out, goals_per_batch=3))  # a complete dataset: nothing to do
    assert HistoryReader(out).num_transitions() == 8 * 2000


@pytest.mark.parametrize("shard_rows", [None, 700])  # 700: shards are also written during training
def test_background_writing_stores_the_same_dataset(tmp_path, monkeypatch, shard_rows):
    if shard_rows:
        monkeypatch.setattr(gen_module, "_SHARD_ROWS", shard_rows)
    monkeypatch.setattr(gen_module, "_FLUSH_ROWS", 3000)  # several hand-offs per batch
    same = generate(_cfg(tmp_path / "same", background_writing=False, goals_per_batch=5))
    behind = generate(_cfg(tmp_path / "behind", background_writing=True, goals_per_batch=5))
    assert content_hash(same) == content_hash(behind)


def test_a_writer_error_surfaces_and_drops_the_batch(tmp_path, monkeypatch):
    def broken(self, columns):
        raise OSError("disk full")

    monkeypatch.setattr(UnitWriter, "append", broken)
    with pytest.raises(OSError, match="disk full"):
        generate(_cfg(tmp_path / "d", background_writing=True))
    assert HistoryReader(tmp_path / "d").units() == []


@pytest.mark.parametrize("values", [
    {"goals": ["9,0"]}, {"goals": ["0,0", "all"]}, {"size": 1}, {"preset": "nope"}, {"steps_per_goal": 0},
    {"steps_per_goal": -5}, {"heldout_fraction": 1.0}, {"ent_coef": -0.1}, {"vf_coef": -1.0}, {"ent_coef": float("nan")}])
def test_bad_options_are_user_errors(tmp_path, values):
    with pytest.raises(UserError):
        make_config(GenerateConfig, {"out": str(tmp_path / "x"), **values})


def test_cli_exits_2_on_bad_input_and_overwrites_nothing(tmp_path, capsys):
    other = tmp_path / "other"
    spec = HistorySpec(state=ColumnSpec.discrete(4), action=ColumnSpec.discrete(2))
    HistoryWriter(other, spec=spec, family="not-darkroom", metadata={}).close()
    before = sorted(p.name for p in other.iterdir())
    for argv in (["--out", str(other), "--size", "3", "--steps-per-goal", "100"],
                 ["--out", str(tmp_path / "a"), "--goals", "9,9"],
                 ["--out", str(tmp_path / "a"), "--preset", "nope"],
                 ["--out", str(tmp_path / "a"), "--steps-per-goal", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["generate", "darkroom", *argv])
        assert exit_info.value.code == 2
        assert "error:" in capsys.readouterr().err
    assert sorted(p.name for p in other.iterdir()) == before
    assert not (tmp_path / "a").exists()


def test_resume_with_different_settings_is_refused(tmp_path):
    out = generate(_cfg(tmp_path / "d", goals=["0,0"]))
    with pytest.raises(UserError, match="different settings"):
        generate(_cfg(out, goals=["0,0"], learning_rate=1e-3))


def test_cli_generate_runs(tmp_path):
    out = tmp_path / "cli"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "darkroom", "--out", str(out), "--size", "3", "--goals", "0,0", "2,1",
                  "--steps-per-goal", "500", "--hidden", "8", "--progress", "false", "--plots", "false",
                  "--tensorboard", "false"])
    assert exit_info.value.code == 0
    reader = HistoryReader(out)
    assert sorted(reader.tasks()) == ["darkroom3-g0-0", "darkroom3-g2-1"] and reader.num_transitions() == 1000


def test_logprob_bits_rounds_the_stored_logprobs_only(tmp_path):
    """--logprob-bits 7 stores bfloat16-precision logprobs; every other column equals the exact run's."""
    generate(_cfg(tmp_path / "exact"))
    generate(_cfg(tmp_path / "bf16", logprob_bits=7))
    exact, rounded = HistoryReader(tmp_path / "exact"), HistoryReader(tmp_path / "bf16")
    assert rounded.spec.logprob_bits == 7 and exact.spec.logprob_bits == 23
    a, b = exact.table().to_pydict(), rounded.table().to_pydict()
    assert all(a[c] == b[c] for c in a if c != "logprob")  # same run: the rounding is at the store only
    np.testing.assert_allclose(b["logprob"], a["logprob"], rtol=2.0 ** -8)
    assert a["logprob"] != b["logprob"]
