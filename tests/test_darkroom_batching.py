"""A goal's learning history is the same bit for bit whatever batch it is trained in (--goals-per-batch, the Ray
backend's units, a resume with other batches), on any number of torch threads, with history writing on or off a
background thread (issue #19 item 4)."""
import hashlib

import numpy as np
import pytest

from ad.config import make_config
from ad.history import HistoryReader, content_hash
from tasks.darkroom.config import GenerateConfig
from tasks.grid import generate as generate_module
from tasks.darkroom.generate import generate

_BASE = {"size": 5, "goals": ["0,0", "4,4", "1,3", "3,0", "0,2", "4,1", "2,4"], "hidden": 9, "num_envs": 3,
         "num_steps": 5, "episode_length": 8, "steps_per_goal": 600, "learning_rate": 3e-3, "seed": 5,
         "heldout_fraction": 0.0, "progress": False, "plots": False, "tensorboard": False}
#: Settings that each broke it before: parameter blocks of odd sizes (5x5 room, hidden 9: 225, 54 and 6 floats,
#: so Adam's scalar tail and unaligned gemm operands), and a 3x3 room (MKL's batched gemm rounds goals at odd
#: batch indices differently); both with and without random starts (the env's own generators).
_CASES = {
    "5x5 hidden 9": {},
    "5x5 hidden 9 random starts": {"random_start": True},
    "3x3 hidden 16 random starts": {"size": 3, "hidden": 16, "random_start": True,
                                    "goals": ["0,0", "0,1", "0,2", "1,0", "1,1", "1,2", "2,0"]},
}


def unit_hashes(path) -> dict[str, str]:
    """SHA-256 of every stored column of each task's streams (in stream order), keyed by task."""
    reader = HistoryReader(path)
    hashes = {}
    for unit in reader.units():
        digest = hashlib.sha256()
        streams = sorted(reader.iter_unit_streams(unit), key=lambda s: s.stream)
        for stream in streams:
            digest.update(f"{stream.stream}|{len(stream)}".encode())
            for name in sorted(stream.columns):
                digest.update(name.encode() + np.ascontiguousarray(stream.columns[name]).tobytes())
        hashes[unit["task"]] = digest.hexdigest()
    return hashes


@pytest.mark.parametrize("case", list(_CASES))
def test_goal_histories_do_not_depend_on_goals_per_batch(tmp_path, case):
    runs = {  # goals_per_batch 0 = all 7 goals in one batch; 2 and 3 leave a last batch of one goal
        "all": {"goals_per_batch": 0, "background_writing": True},
        "1": {"goals_per_batch": 1, "background_writing": False},
        "2": {"goals_per_batch": 2, "background_writing": True},
        "3, 2 threads": {"goals_per_batch": 3, "background_writing": False, "threads": 2},
        "1, 2 threads": {"goals_per_batch": 1, "background_writing": True, "threads": 2},
    }
    hashes = {}
    for i, (name, options) in enumerate(runs.items()):
        out = tmp_path / f"run{i}"
        generate(make_config(GenerateConfig, {**_BASE, **_CASES[case], "out": str(out), **options}))
        hashes[name] = unit_hashes(out)
    reference = hashes["all"]
    assert len(reference) == 7
    for name, got in hashes.items():
        differing = sorted(task for task in reference if got.get(task) != reference[task])
        assert not differing, f"goals_per_batch {name}: {len(differing)} of {len(reference)} tasks differ: {differing}"


def test_a_run_resumed_with_another_goals_per_batch_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    """Stopped after its first batch of 3 goals, resumed with batches of 2: the dataset of a run in one batch."""
    cfg = {**_BASE, **_CASES["3x3 hidden 16 random starts"]}
    whole = generate(make_config(GenerateConfig, {**cfg, "out": str(tmp_path / "whole")}))
    real_train, calls = generate_module._train_batch, []

    def dying_train(run_cfg, goals, *args):
        calls.append(goals)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_train(run_cfg, goals, *args)

    monkeypatch.setattr(generate_module, "_train_batch", dying_train)
    with pytest.raises(KeyboardInterrupt):
        generate(make_config(GenerateConfig, {**cfg, "out": str(tmp_path / "mixed"), "goals_per_batch": 3}))
    assert len(HistoryReader(tmp_path / "mixed").units()) == 3
    monkeypatch.setattr(generate_module, "_train_batch", real_train)
    generate(make_config(GenerateConfig, {**cfg, "out": str(tmp_path / "mixed"), "goals_per_batch": 2}))
    assert content_hash(tmp_path / "mixed") == content_hash(whole)


def test_ray_backend_defaults_give_the_local_dataset(tmp_path):
    """--backend ray's default units (8 goals each) write what the local default (all goals in one batch) writes."""
    ray = pytest.importorskip("ray")
    goals = ["0,0", "0,1", "0,2", "0,3", "0,4", "1,0", "1,1", "1,2", "4,3"]  # Ray units of 8 goals and of 1
    cfg = {**_BASE, "goals": goals, "random_start": True}
    local = generate(make_config(GenerateConfig, {**cfg, "out": str(tmp_path / "local")}))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = generate(make_config(GenerateConfig, {**cfg, "out": str(tmp_path / "ray"), "backend": "ray",
                                                       "workers": 2}))
    finally:
        ray.shutdown()
    assert {u["info"]["batch_goals"] for u in HistoryReader(remote).units()} == {8, 1}
    assert unit_hashes(remote) == unit_hashes(local)
