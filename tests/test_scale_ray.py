"""`ad generate darkroom --backend ray` on a real 2-CPU local Ray cluster started here (skipped without ray)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ad.config import make_config  # noqa: E402
from ad.distributed import WorkUnit, run_units  # noqa: E402
from ad.errors import UserError  # noqa: E402
from ad.history import HistoryReader, content_hash  # noqa: E402
from tasks.darkroom.config import GenerateConfig  # noqa: E402
from tasks.darkroom.generate import generate  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.scale_generate import kill_ray_worker_mid_unit, transition_diff  # noqa: E402

TINY = {"size": 3, "steps_per_goal": 2000, "hidden": 16, "progress": False, "tensorboard": False, "plots": False,
        "log_every": 10}


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _cfg(out, **kw):
    return make_config(GenerateConfig, {"out": str(out), **TINY, **kw})


def test_ray_dataset_equals_the_local_one(cluster, tmp_path):
    local = generate(_cfg(tmp_path / "local", goals_per_batch=3))
    remote = generate(_cfg(f"file://{tmp_path / 'ray'}", goals_per_batch=3, backend="ray", workers=2))
    reader = HistoryReader(remote)
    assert len(reader.units()) == 8 and {u["info"]["batch_goals"] for u in reader.units()} == {3, 2}
    assert content_hash(remote) == content_hash(local)
    assert not any((tmp_path / "ray" / ".staging").glob("task=*/run=*"))  # no leftovers
    generate(_cfg(tmp_path / "ray", goals_per_batch=3, backend="ray"))  # complete: nothing to do
    assert content_hash(tmp_path / "ray") == content_hash(local)


def test_a_local_run_interrupted_then_resumed_on_ray(cluster, tmp_path, monkeypatch):
    """Backend options are not part of the dataset: a run stopped locally finishes on Ray, identically."""
    from tasks.grid import generate as gen_module

    full = generate(_cfg(tmp_path / "full", goals_per_batch=2))
    real_train, calls = gen_module._train_batch, []

    def dying_train(cfg, goals, *args):
        calls.append(goals)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_train(cfg, goals, *args)

    monkeypatch.setattr(gen_module, "_train_batch", dying_train)
    with pytest.raises(KeyboardInterrupt):
        generate(_cfg(tmp_path / "mixed", goals_per_batch=2))
    assert len(HistoryReader(tmp_path / "mixed").units()) == 2
    generate(_cfg(tmp_path / "mixed", goals_per_batch=2, backend="ray", workers=2))  # workers run the real code
    assert transition_diff(full, tmp_path / "mixed") == (0, 0)
    assert content_hash(tmp_path / "mixed") == content_hash(full)


def test_a_user_error_in_a_unit_comes_back_as_itself(cluster, tmp_path):
    from tasks.darkroom.generate import DARKROOM
    from tasks.grid.generate import UnitJob, grid_unit

    generate(_cfg(tmp_path / "d", goals=["0,0"]))
    other = _cfg(tmp_path / "d", goals=["0,0"], learning_rate=0.5)  # the worker finds a dataset of other settings
    with pytest.raises(UserError, match="different settings"):
        run_units(grid_unit, [WorkUnit("one", UnitJob(other, [(0, 0)], str(tmp_path / "d"), DARKROOM))],
                  backend="ray")


@pytest.mark.slow
def test_a_ray_worker_killed_mid_unit_reruns_the_unit(cluster, tmp_path, capfd):
    reference = generate(_cfg(tmp_path / "ref", goals_per_batch=4, steps_per_goal=30_000))
    cfg = _cfg(tmp_path / "ray", goals_per_batch=4, steps_per_goal=30_000, backend="ray")
    stats = kill_ray_worker_mid_unit(cfg, after=0.5)
    assert stats["killed_pid"] is not None and stats["finished"]
    assert "its worker died" in capfd.readouterr().err
    assert transition_diff(reference, tmp_path / "ray") == (0, 0)
    assert content_hash(tmp_path / "ray") == content_hash(reference)
