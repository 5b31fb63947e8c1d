"""Minari interoperability: `ad export minari` / `ad import minari` (ad.interop.minari).

Write-then-read round trips over Minari's three storages: every transition and the order metadata as a Minari
user sees them, then the re-imported history row for row.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

minari = pytest.importorskip("minari")

from ad.config import parse_config  # noqa: E402
from ad.errors import UserError  # noqa: E402
from ad.history import ColumnSpec, HistoryReader, HistorySpec, HistoryWriter  # noqa: E402
from ad.interop import minari as interop  # noqa: E402
from ad.interop import minari_export, minari_import  # noqa: E402
from benchmarks.helpers.synthetic import write_synthetic  # noqa: E402

FORMATS = ["hdf5", "parquet", "arrow"]
HEADER = {"format", "schema_version", "family", "spec", "provenance", "units", "updated"}


# ---------------------------------------------------------------------------- datasets
def _synthetic(path: Path) -> Path:
    """Discrete states/actions + a float32 `value` column; 130-step streams end in a cut 10-step episode."""
    write_synthetic(path, num_tasks=2, num_streams=2, length=130, seed=3)
    return path


def _vector(path: Path) -> Path:
    """Vector states, a next_state column, string/bool/int/float64 extras, several runs, odd stream ids,
    episodes of 1..6 steps, a stream starting mid-episode, policy updates inside episodes, rounded logprobs."""
    spec = HistorySpec(ColumnSpec.vector(3), ColumnSpec.discrete(4), logprob_bits=10,
                       extra={"next_state": "list<float32>", "note": "string", "flag": "bool", "count": "int64",
                              "value": "float64"})
    meta = {"task_spec": {"episode_length": 6, "kind": "toy"}, "source": {"algorithm": "toy", "config": {"a": 1}},
            "split": {"train": ["toy-a"], "heldout": ["toy-b"]}}
    writer = HistoryWriter(path, spec, family="toyvec", metadata=meta)
    rng = np.random.default_rng(0)
    for task, run in (("toy-a", 0), ("toy-a", 2), ("toy-b", 1)):
        with writer.open_unit(task, run) as unit:
            for stream in (3, 7):
                lengths = rng.integers(1, 7, size=5)
                episode = np.repeat(np.arange(5, dtype=np.int32) + stream, lengths)
                step = np.concatenate([np.arange(k, dtype=np.int32) for k in lengths])
                step[: lengths[0]] += 2  # the stream starts mid-episode
                n = len(step)
                states = rng.normal(size=(n + 1, 3)).astype(np.float32)
                unit.append({"stream": np.full(n, stream, np.int32), "update": (np.arange(n) // 4).astype(np.int64),
                             "episode": episode, "step": step, "state": states[:n],
                             "action": rng.integers(0, 4, n), "reward": rng.normal(size=n).astype(np.float32),
                             "terminated": rng.random(n) < 0.3, "truncated": rng.random(n) < 0.2,
                             "logprob": -rng.random(n).astype(np.float32),
                             "next_state": list(states[1:]), "note": [f"n{i}" for i in range(n)],
                             "flag": rng.random(n) < 0.5, "count": rng.integers(-5, 5, n),
                             "value": rng.normal(size=n)})
            unit.commit({"seconds": 1.5, "rows_note": task})
    writer.close()
    return path


DATASETS = {"synthetic": _synthetic, "vector": _vector}


# ---------------------------------------------------------------------------- helpers
def _episodes(reader: HistoryReader) -> list[tuple[dict, dict]]:
    """(order metadata, columns) of every episode of the history, in the store's order."""
    out = []
    for s in reader.streams():
        ep = s.columns["episode"]
        bounds = np.flatnonzero(ep[1:] != ep[:-1]) + 1
        for a, b in zip([0, *bounds], [*bounds, len(ep)]):
            meta = {"task": s.task, "run": s.run, "stream": s.stream, "episode": int(ep[a]),
                    "update_first": int(s.columns["update"][a]), "update_last": int(s.columns["update"][b - 1])}
            out.append((meta, {c: v[a:b] for c, v in s.columns.items()}))
    return out


def _same(a, b) -> bool:
    if np.asarray(a).dtype == object or np.asarray(b).dtype == object:
        return len(a) == len(b) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))
    return np.array_equal(np.asarray(a), np.asarray(b))


def _assert_same_history(original: Path, restored: Path) -> None:
    old, new = HistoryReader(original), HistoryReader(restored)
    assert new.family == old.family and new.spec == old.spec
    strip = HEADER | {"imported_from"}
    assert {k: v for k, v in new.metadata.items() if k not in strip} == \
           {k: v for k, v in old.metadata.items() if k not in strip}
    assert new.metadata["imported_from"]["provenance"] == old.metadata["provenance"]
    assert [(u["task"], u["run"], u["rows"], u["info"]) for u in new.units()] == \
           [(u["task"], u["run"], u["rows"], u["info"]) for u in old.units()]
    old_streams, new_streams = old.streams(), new.streams()
    assert [(s.task, s.run, s.stream) for s in new_streams] == [(s.task, s.run, s.stream) for s in old_streams]
    for a, b in zip(old_streams, new_streams):
        assert set(a.columns) == set(b.columns)
        for column in a.columns:
            assert a.columns[column].dtype == b.columns[column].dtype, column
            assert _same(a.columns[column], b.columns[column]), (a.task, a.run, a.stream, column)


# ---------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("kind", sorted(DATASETS))
def test_round_trip(tmp_path, data_format, kind):
    if data_format == "hdf5":
        pytest.importorskip("h5py")
    data = DATASETS[kind](tmp_path / "history")
    root = tmp_path / "minari"
    name = f"ad/{kind}/history-v0"
    result = interop.export_minari(str(data), name, root=str(root), data_format=data_format)
    assert Path(result["path"]) == root / name
    assert not (root / interop.STAGING).exists()

    # what a Minari user sees: every transition, the order metadata, the per-transition columns in infos
    with interop.datasets_root(root):
        dataset = minari.load_dataset(name)
        assert name in minari.list_local_datasets()
    reader = HistoryReader(data)
    expected = _episodes(reader)
    assert dataset.total_episodes == len(expected) == result["episodes"]
    assert dataset.total_steps == reader.num_transitions() == result["steps"]
    assert dataset.storage.metadata["data_format"] == data_format
    header = dataset.storage.metadata[interop.METADATA_KEY]
    assert header["family"] == reader.family and header["spec"] == reader.spec.to_dict()
    final_rule = header["export"]["final_observation"]
    assert final_rule == ("next_state" if kind == "vector" else "repeat_last_state")
    metas = list(dataset.storage.get_episode_metadata(dataset.episode_indices))
    for (want_meta, cols), meta, episode in zip(expected, metas, dataset.iterate_episodes()):
        assert {k: meta[k] for k in want_meta} == want_meta
        steps = len(cols["reward"])
        assert len(episode) == steps and len(episode.observations) == steps + 1
        obs = np.asarray(episode.observations)
        np.testing.assert_array_equal(obs[:steps], cols["state"])
        final = cols["next_state"][-1] if final_rule == "next_state" else cols["state"][-1]
        np.testing.assert_array_equal(obs[steps], final)
        np.testing.assert_array_equal(np.asarray(episode.actions)[:steps], cols["action"])
        np.testing.assert_array_equal(episode.rewards, cols["reward"])
        np.testing.assert_array_equal(episode.terminations, cols["terminated"])
        np.testing.assert_array_equal(episode.truncations, cols["truncated"])
        for column in ("update", "step", "logprob", *reader.spec.extra):
            info = episode.infos[column]
            assert len(info) == steps + 1  # padded: the last entry repeats the last transition's
            values = minari_import._restore(info, header["export"]["infos"][column], steps)
            assert _same(values, cols[column]), column

    # and back: the same history, row for row
    restored = tmp_path / "restored"
    summary = interop.import_minari(str(restored), name=name, root=str(root))
    assert summary["exact"] and summary["rows"] == reader.num_transitions()
    _assert_same_history(data, restored)
    # re-running the import keeps the complete units and writes nothing new
    assert interop.import_minari(str(restored), path=str(root / name))["rows"] == 0
    _assert_same_history(data, restored)


def test_export_keeps_environment_and_home_untouched(tmp_path, monkeypatch):
    env_root = tmp_path / "env-root"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(env_root))
    data = _synthetic(tmp_path / "history")
    interop.export_minari(str(data), "ad/synth/a-v0", root=str(tmp_path / "root"), data_format="parquet")
    assert os.environ["MINARI_DATASETS_PATH"] == str(env_root)
    assert (tmp_path / "root" / "ad" / "synth" / "a-v0" / "data").is_dir()
    assert not (env_root / "ad").exists()
    # without a root Minari's own variable decides
    interop.export_minari(str(data), "ad/synth/b-v0", data_format="parquet")
    assert (env_root / "ad" / "synth" / "b-v0" / "data").is_dir()


def test_skip_columns_and_ragged_lists(tmp_path):
    data = _vector(tmp_path / "history")
    root = tmp_path / "root"
    interop.export_minari(str(data), "ad/vec/skip-v0", root=str(root), data_format="parquet",
                          skip_columns=["note", "next_state"])
    with interop.datasets_root(root):
        dataset = minari.load_dataset("ad/vec/skip-v0")
    header = dataset.storage.metadata[interop.METADATA_KEY]
    assert header["export"]["final_observation"] == "repeat_last_state"
    assert "note" not in header["spec"]["extra"] and "note" not in next(iter(dataset)).infos
    restored = tmp_path / "restored"
    interop.import_minari(str(restored), name="ad/vec/skip-v0", root=str(root))
    assert set(HistoryReader(restored).spec.extra) == {"flag", "count", "value"}
    with pytest.raises(UserError, match="not an extra column"):
        interop.export_minari(str(data), "ad/vec/bad-v0", root=str(root), skip_columns=["reward"])

    ragged = tmp_path / "ragged"
    spec = HistorySpec(ColumnSpec.discrete(3), ColumnSpec.discrete(2), extra={"ids": "list<int32>"})
    writer = HistoryWriter(ragged, spec, family="toy")
    with writer.open_unit("t", 0) as unit:
        unit.append({"stream": np.zeros(3, np.int32), "update": np.zeros(3, np.int64),
                     "episode": np.zeros(3, np.int32), "step": np.arange(3, dtype=np.int32), "state": np.arange(3),
                     "action": np.zeros(3, int), "reward": np.zeros(3, np.float32), "terminated": np.zeros(3, bool),
                     "truncated": np.zeros(3, bool), "logprob": np.zeros(3, np.float32), "ids": [[1], [1, 2], [3]]})
    writer.close()
    with pytest.raises(UserError, match="--skip-columns ids"):
        interop.export_minari(str(ragged), "ad/toy/ragged-v0", root=str(root), data_format="parquet")
    assert not (root / "ad" / "toy" / "ragged-v0").exists() and not (root / interop.STAGING).exists()


def test_export_selected_tasks(tmp_path):
    data = _vector(tmp_path / "history")
    root = tmp_path / "root"
    result = interop.export_minari(str(data), "ad/vec/b-v0", root=str(root), data_format="parquet", tasks=["toy-b"])
    interop.import_minari(str(tmp_path / "back"), path=str(root / "ad" / "vec" / "b-v0"))
    back = HistoryReader(tmp_path / "back")
    assert back.tasks() == ["toy-b"] and back.num_transitions() == result["steps"]
    assert back.num_transitions() == sum(u["rows"] for u in HistoryReader(data).units(["toy-b"]))
    with pytest.raises(UserError, match="--tasks toy-c: not in"):
        interop.export_minari(str(data), "ad/vec/c-v0", root=str(root), tasks=["toy-c"])


def test_interrupted_export_leaves_nothing_and_reruns(tmp_path, monkeypatch):
    data = _synthetic(tmp_path / "history")
    root = tmp_path / "root"
    original = minari_export._unit_episodes
    calls = []

    def dies_on_second_unit(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(*args)

    monkeypatch.setattr(minari_export, "_unit_episodes", dies_on_second_unit)
    with pytest.raises(KeyboardInterrupt):
        interop.export_minari(str(data), "ad/synth/k-v0", root=str(root), data_format="hdf5")
    assert not (root / "ad" / "synth" / "k-v0").exists() and not (root / interop.STAGING).exists()
    monkeypatch.setattr(minari_export, "_unit_episodes", original)
    interop.export_minari(str(data), "ad/synth/k-v0", root=str(root), data_format="hdf5")
    interop.import_minari(str(tmp_path / "back"), name="ad/synth/k-v0", root=str(root))
    _assert_same_history(data, tmp_path / "back")


# ---------------------------------------------------------------------------- datasets from elsewhere
def _foreign(root: Path, name: str = "other/pointmass/random-v1") -> list:
    """A Minari dataset made with Minari alone: 2x2 float64 Box observations, Discrete(3, start=1) actions."""
    import gymnasium as gym
    from minari.data_collector import EpisodeBuffer

    rng = np.random.default_rng(1)
    episodes = []
    for length in (4, 1, 6):
        episodes.append(EpisodeBuffer(observations=rng.normal(size=(length + 1, 2, 2)),
                                      actions=rng.integers(1, 4, size=length), rewards=rng.normal(size=length),
                                      terminations=np.arange(length) == length - 1, truncations=np.zeros(length, bool)))
    with interop.datasets_root(root), pytest.warns(UserWarning):
        minari.create_dataset_from_buffers(name, episodes, observation_space=gym.spaces.Box(-5, 5, (2, 2), np.float64),
                                           action_space=gym.spaces.Discrete(3, start=1), data_format="parquet",
                                           algorithm_name="random")
    return episodes


@pytest.mark.parametrize("streams", ["dataset", "episode"])
def test_import_foreign(tmp_path, streams):
    episodes = _foreign(tmp_path / "root")
    out = tmp_path / "history"
    summary = interop.import_minari(str(out), name="other/pointmass/random-v1", root=str(tmp_path / "root"),
                                    streams=streams)
    assert not summary["exact"] and summary["rows"] == 11
    reader = HistoryReader(out)
    assert reader.family == "minari" and reader.tasks() == ["other.pointmass.random-v1"]
    assert reader.spec.state == ColumnSpec.vector(4) and reader.spec.action == ColumnSpec.discrete(3)
    assert reader.metadata["task_spec"]["episode_length"] == 6
    assert reader.metadata["source"]["algorithm"] == "random"
    streams_read = reader.streams()
    if streams == "dataset":
        assert len(streams_read) == 1
        cols = streams_read[0].columns
        np.testing.assert_array_equal(cols["episode"], np.repeat([0, 1, 2], [4, 1, 6]))
    else:
        assert [s.stream for s in streams_read] == [0, 1, 2]
        cols = {c: np.concatenate([s.columns[c] for s in streams_read]) for c in streams_read[0].columns}
        np.testing.assert_array_equal(cols["episode"], 0)
    np.testing.assert_array_equal(cols["state"], np.concatenate(
        [e.observations[:-1].reshape(-1, 4) for e in episodes]).astype(np.float32))
    np.testing.assert_array_equal(cols["action"], np.concatenate([e.actions for e in episodes]) - 1)
    np.testing.assert_array_equal(cols["reward"], np.concatenate([e.rewards for e in episodes]).astype(np.float32))
    np.testing.assert_array_equal(cols["step"], np.concatenate([np.arange(len(e.rewards)) for e in episodes]))
    np.testing.assert_array_equal(cols["terminated"], np.concatenate([e.terminations for e in episodes]))
    assert not cols["update"].any() and not cols["logprob"].any()


def test_imported_foreign_dataset_loads_as_rl_windows(tmp_path):
    from ad.data import RLTrajectoryDataset

    _foreign(tmp_path / "root")
    out = tmp_path / "history"
    interop.import_minari(str(out), path=str(tmp_path / "root" / "other" / "pointmass" / "random-v1"))
    windows = RLTrajectoryDataset(str(out), window=4)
    assert len(windows) > 0


# ---------------------------------------------------------------------------- bad input
def test_bad_names_and_paths(tmp_path):
    data = _synthetic(tmp_path / "history")
    root = str(tmp_path / "root")
    for bad in ("name-v0", "ns/name-v0", "ns/env/name", "ns/env/name-vx", "ns/env/na me-v0", "a/b/c/d-v0", ""):
        with pytest.raises(UserError, match="NAMESPACE/ENV/NAME-vVERSION"):
            interop.export_minari(str(data), bad, root=root)
    with pytest.raises(UserError, match="not a learning-history dataset"):
        interop.export_minari(str(tmp_path / "missing"), "ad/x/y-v0", root=root)
    with pytest.raises(UserError, match="--data-format"):
        interop.export_minari(str(data), "ad/x/y-v0", root=root, data_format="csv")
    with pytest.raises(UserError, match="no Minari dataset ad/x/missing-v0"):
        interop.import_minari(str(tmp_path / "out"), name="ad/x/missing-v0", root=root)
    with pytest.raises(UserError, match="not a Minari dataset folder"):
        interop.import_minari(str(tmp_path / "out"), path=str(tmp_path))
    with pytest.raises(UserError, match="not a Minari dataset id"):
        interop.import_minari(str(tmp_path / "out"), name="no version", root=root)
    assert not (tmp_path / "out").exists()


def test_existing_name_needs_overwrite(tmp_path):
    data = _synthetic(tmp_path / "history")
    root = tmp_path / "root"
    first = interop.export_minari(str(data), "ad/synth/same-v0", root=str(root), data_format="parquet")
    with pytest.raises(UserError, match="already exists.*--overwrite"):
        interop.export_minari(str(data), "ad/synth/same-v0", root=str(root), data_format="hdf5")
    other = _vector(tmp_path / "other")
    second = interop.export_minari(str(other), "ad/synth/same-v0", root=str(root), data_format="hdf5",
                                   overwrite=True)
    assert second["episodes"] != first["episodes"]
    with interop.datasets_root(root):
        dataset = minari.load_dataset("ad/synth/same-v0")
    assert dataset.storage.metadata["data_format"] == "hdf5" and dataset.total_episodes == second["episodes"]
    assert not (root / interop.STAGING).exists()


def test_text_columns_are_refused(tmp_path):
    spec = HistorySpec(ColumnSpec.text(), ColumnSpec.text())
    writer = HistoryWriter(tmp_path / "text", spec, family="toytext")
    with writer.open_unit("t", 0) as unit:
        unit.append({"stream": np.zeros(2, np.int32), "update": np.zeros(2, np.int64),
                     "episode": np.zeros(2, np.int32), "step": np.arange(2, dtype=np.int32), "state": ["a", "b"],
                     "action": ["c", "d"], "reward": np.zeros(2, np.float32), "terminated": np.zeros(2, bool),
                     "truncated": np.zeros(2, bool), "logprob": np.zeros(2, np.float32)})
    writer.close()
    with pytest.raises(UserError, match="state column holds text values.*discrete and fixed-size vector"):
        interop.export_minari(str(tmp_path / "text"), "ad/text/t-v0", root=str(tmp_path / "root"))


def test_missing_minari_says_how_to_install(tmp_path, monkeypatch):
    data = _synthetic(tmp_path / "history")
    monkeypatch.setitem(sys.modules, "minari", None)  # `import minari` raises ImportError
    with pytest.raises(UserError, match=r"pip install 'algorithm-distillation\[minari\]'"):
        interop.export_minari(str(data), "ad/synth/a-v0", root=str(tmp_path / "root"))
    with pytest.raises(UserError, match=r"pip install 'algorithm-distillation\[minari\]'"):
        interop.import_minari(str(tmp_path / "out"), name="ad/synth/a-v0", root=str(tmp_path / "root"))


# ---------------------------------------------------------------------------- commands
def test_command_configs(tmp_path):
    from ad.commands.minari_export import ExportMinariConfig
    from ad.commands.minari_import import ImportMinariConfig

    argv = [str(tmp_path), "--name", "ad/x/y-v1", "--data-format", "parquet", "--skip-columns", "value", "note",
            "--overwrite"]
    config = parse_config(ExportMinariConfig, argv, prog="ad export minari")
    assert (config.data, config.name, config.data_format, config.skip_columns, config.overwrite) == \
           (str(tmp_path), "ad/x/y-v1", "parquet", ["value", "note"], True)
    for argv, message in (([], "--name is required"), (["--name", "x-v0"], "NAMESPACE/ENV/NAME"),
                          (["--name", "a/b/c-v0", "--data-format", "csv"], "--data-format")):
        with pytest.raises(UserError, match=message):
            parse_config(ExportMinariConfig, argv, prog="ad export minari")
    config = parse_config(ImportMinariConfig, ["--name", "D4RL/door/human-v2", "--out", "d"], prog="ad import minari")
    assert (config.name, config.out, config.streams) == ("D4RL/door/human-v2", "d", "dataset")
    for argv, message in (([], "exactly one"), (["--name", "a-v0", "--path", "p"], "exactly one"),
                          (["--path", "p", "--streams", "rows"], "--streams"), (["--name", "a b"], "not a Minari")):
        with pytest.raises(UserError, match=message):
            parse_config(ImportMinariConfig, argv, prog="ad import minari")


def test_command_modules_import_neither_torch_nor_minari():
    code = ("import sys, ad.commands.minari_export, ad.commands.minari_import\n"
            "from ad import registry\n"
            "assert {('export', 'minari'), ('import', 'minari')} <= set(registry._COMMANDS)\n"
            "heavy = [m for m in ('torch', 'minari', 'h5py', 'pyarrow') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def test_cli_round_trip(tmp_path, capsys):
    from ad import cli

    if not {"export", "import"} <= set(cli.GROUPS):
        pytest.skip("ad.cli.GROUPS does not list the export / import groups yet")
    data = _synthetic(tmp_path / "history")
    root = tmp_path / "root"
    assert cli.run(["export", "minari", str(data), "--name", "ad/synth/cli-v0", "--out", str(root),
                    "--data-format", "parquet"]) == 0
    assert cli.run(["import", "minari", "--name", "ad/synth/cli-v0", "--root", str(root),
                    "--out", str(tmp_path / "back")]) == 0
    assert "restored exactly" in capsys.readouterr().out
    _assert_same_history(data, tmp_path / "back")
