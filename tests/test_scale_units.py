"""ad.distributed without Ray: work units, worker-mode writers, per-rank batches, storage URLs."""
from __future__ import annotations

import sys
import uuid

import fsspec
import numpy as np
import pytest
import torch

from ad.config import make_config
from ad.distributed import GlobalBatchSampler, WorkUnit, run_units, shard_loader
from ad.errors import UserError
from ad.history import HistoryReader, HistoryWriter, Location, content_hash
from benchmarks.helpers.synthetic import SPEC, synthetic_columns
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.generate import generate

TINY = {"size": 3, "steps_per_goal": 1000, "hidden": 8, "progress": False, "tensorboard": False, "plots": False,
        "log_every": 10}


def _square(x: int) -> int:
    return x * x


def test_local_backend_runs_units_in_order_and_reports_each():
    seen = []
    results = run_units(_square, [WorkUnit(f"u{i}", i) for i in range(4)], on_result=lambda u, r: seen.append((u.key, r)))
    assert results == {"u0": 0, "u1": 1, "u2": 4, "u3": 9} and seen == [("u0", 0), ("u1", 1), ("u2", 4), ("u3", 9)]
    with pytest.raises(ValueError, match="unique"):
        run_units(_square, [WorkUnit("a", 1), WorkUnit("a", 2)])


@pytest.mark.parametrize("options, message", [
    ({"backend": "spark"}, "--backend"), ({"workers": -1}, "--workers"), ({"address": "auto"}, "--address")])
def test_bad_backend_options_are_user_errors(tmp_path, options, message):
    with pytest.raises(UserError, match=message):
        make_config(GenerateConfig, {"out": str(tmp_path / "d"), **options})


def test_ray_backend_without_ray_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(UserError, match=r"pip install 'algorithm-distillation\[ray\]'"):
        generate(make_config(GenerateConfig, {"out": str(tmp_path / "d"), "backend": "ray", **TINY}))


def test_worker_writers_commit_units_that_the_driver_records(tmp_path):
    """Workers write shards and move units into place; only the driver writes dataset.json."""
    path = tmp_path / "ds"
    with pytest.raises(RuntimeError, match="driver creates"):
        HistoryWriter(path, SPEC, family="synthetic", worker=True)
    driver = HistoryWriter(path, SPEC, family="synthetic", metadata={})
    worker = HistoryWriter(path, SPEC, family="synthetic", metadata={}, worker=True)
    with worker.unit("t0", 0) as unit:
        unit.append(synthetic_columns(np.random.default_rng(0), 2, 50, goal=(0, 0)))
    worker.close()
    assert HistoryReader(path).units() == []  # in place, but not recorded yet
    record = HistoryWriter(path, SPEC, family="synthetic", metadata={}, worker=True)  # workers see what is recorded
    assert not record.is_complete("t0", 0)
    (record_t0,) = [r for r in worker._units.values()]
    driver.record_unit(record_t0)
    driver.sync()  # a loaded machine may defer the dataset.json rewrite after a commit; sync writes it now
    assert [u["task"] for u in HistoryReader(path).units()] == ["t0"]
    with pytest.raises(RuntimeError, match="not in place"):
        driver.record_unit({**record_t0, "task": "t9"})
    with pytest.raises(UserError, match="different settings"):
        HistoryWriter(path, SPEC, family="synthetic", metadata={"x": 1}, worker=True)


def test_global_batch_is_split_over_ranks_without_overlap():
    sampler = torch.utils.data.RandomSampler(range(1000), replacement=True, num_samples=64,
                                             generator=torch.Generator().manual_seed(3))
    single = [b for b in torch.utils.data.BatchSampler(sampler, 16, drop_last=True)]
    ranks = []
    for rank in range(4):  # every rank draws from the same seed
        sampler.generator.manual_seed(3)
        ranks.append(list(GlobalBatchSampler(sampler, 16, rank, 4)))
    assert all(len(r) == 4 and all(len(b) == 4 for b in r) for r in ranks)
    for step, batch in enumerate(single):  # the ranks' slices, in rank order, are the single-process batch
        assert sum((ranks[r][step] for r in range(4)), []) == batch
    with pytest.raises(UserError, match="multiple"):
        GlobalBatchSampler(sampler, 10, 0, 4)


def test_shard_loader_keeps_collate_and_returns_the_loader_for_one_process():
    data = torch.utils.data.TensorDataset(torch.arange(100))
    sampler = torch.utils.data.RandomSampler(data, replacement=True, num_samples=40,
                                             generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(data, batch_size=8, sampler=sampler, drop_last=True)
    assert shard_loader(loader, 0, 1) is loader
    sampler.generator.manual_seed(0)
    full = [b[0] for b in loader]
    sampler.generator.manual_seed(0)
    half = [b[0] for b in shard_loader(loader, 1, 2)]
    assert len(half) == 5 and all(torch.equal(h, f[4:]) for h, f in zip(half, full))


def test_memory_and_fsspec_filesystems_hold_the_same_dataset(tmp_path):
    def write(out, filesystem=None):
        writer = HistoryWriter(out, SPEC, family="synthetic", metadata={}, filesystem=filesystem)
        for i, task in enumerate(["a", "b"]):
            with writer.unit(task, 0) as unit:
                unit.append(synthetic_columns(np.random.default_rng(i), 2, 80, goal=(1, 1)))
        writer.close()

    memory = f"memory://scale-{uuid.uuid4().hex[:8]}/ds"
    write(tmp_path / "local")
    write(memory)
    write(str(tmp_path / "fsspec"), filesystem=fsspec.filesystem("file"))
    write(f"file://{tmp_path / 'url'}")
    expected = content_hash(tmp_path / "local")
    assert content_hash(memory) == expected
    assert content_hash(str(tmp_path / "fsspec"), filesystem=fsspec.filesystem("file")) == expected
    assert content_hash(f"file://{tmp_path / 'url'}") == expected
    assert Location.of(memory).local_path() is None and Location.of(f"file://{tmp_path}").local_path() == str(tmp_path)
    with pytest.raises(UserError, match="scheme"):
        Location.of("nosuchscheme://bucket/x")


def test_generate_to_urls_equals_generate_to_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run outputs of a remote --out go to ./runs/generate-<name>
    local = generate(make_config(GenerateConfig, {"out": str(tmp_path / "local"), "goals": ["0,0", "2,2"], **TINY}))
    url = generate(make_config(GenerateConfig, {"out": f"file://{tmp_path / 'url'}", "goals": ["0,0", "2,2"], **TINY}))
    assert url == tmp_path / "url" and (url / "_run" / "summary.json").is_file()
    memory = f"memory://scale-{uuid.uuid4().hex[:8]}/darkroom"
    assert generate(make_config(GenerateConfig, {"out": memory, "goals": ["0,0", "2,2"], **TINY})) == memory
    assert (tmp_path / "runs" / "generate-darkroom" / "summary.json").is_file()
    assert content_hash(local) == content_hash(url) == content_hash(memory)
    with pytest.raises(UserError, match="memory://"):
        generate(make_config(GenerateConfig, {"out": memory, "backend": "ray", **TINY}))


def test_train_rl_reads_a_dataset_from_a_url(tmp_path):
    from models.rl.config import TrainRLConfig
    from benchmarks.helpers.synthetic_goals import write_synthetic_dataset
    from models.rl.train import train

    memory = f"memory://scale-{uuid.uuid4().hex[:8]}/syn"
    write_synthetic_dataset(memory, num_tasks=3, length=100)
    cfg = make_config(TrainRLConfig, {"data": memory, "out": str(tmp_path / "run"), "n_layer": 1, "n_head": 2,
                                      "n_embd": 16, "n_ff": 32, "context": 10, "batch_size": 4, "max_steps": 2,
                                      "val_every": 0, "progress": False, "threads": 1})
    assert (train(cfg) / "model.safetensors").is_file()
    with pytest.raises(UserError, match="multiple of the number of processes"):
        make_config(TrainRLConfig, {"data": memory, "batch_size": 5, "devices": 2})


def test_a_process_layout_lightning_refuses_is_a_user_error_and_writes_nothing(tmp_path, capsys):
    from ad import cli
    from models.lm.config import TrainLMConfig
    from benchmarks.helpers.synthetic_goals import write_synthetic_dataset

    data = write_synthetic_dataset(tmp_path / "syn", num_tasks=3, length=100)
    argv = ["train", "rl", "--data", str(data), "--out", str(tmp_path / "run"), "--context", "10", "--max-steps",
            "2", "--progress", "false"]
    fsdp1_on_cpu = ["--strategy", "fsdp", "--devices", "2", "--accelerator", "cpu"]  # rl's fsdp: Lightning FSDP1
    for extra, message in ((["--strategy", "no-such-strategy"], "--strategy no-such-strategy"),
                           (fsdp1_on_cpu, "requires a GPU")):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*argv, *extra])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
        assert not (tmp_path / "run").exists()
    with pytest.raises(UserError, match="multiple of the number of processes"):
        make_config(TrainLMConfig, {"batch_size": 3, "devices": 2})
