"""End to end with real processes: SIGKILLed `ad generate` / `ad train rl` resume; DDP on 2 CPU processes = 1 process."""
from __future__ import annotations

import glob
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ad.history import HistoryReader, content_hash

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.scale_generate import ad_command, kill_and_resume, read_with_globs, transition_diff  # noqa: E402

pytestmark = pytest.mark.slow


def _generate_argv(out: Path) -> list[str]:
    return ad_command("generate", "darkroom", "--out", str(out), "--size", "3", "--steps-per-goal", "40000",
                      "--hidden", "16", "--goals-per-batch", "1", "--progress", "false", "--plots", "false",
                      "--tensorboard", "false")


def test_generate_killed_five_times_then_resumed_equals_an_uninterrupted_run(tmp_path):
    """Also: while each run is in progress and after each kill, DuckDB and polars read the dataset through the
    README's glob ``<out>/**/*.parquet`` without an error (files being written never end in .parquet)."""
    subprocess.run(_generate_argv(tmp_path / "ref"), check=True, capture_output=True)
    unit_seconds = statistics.median(u["info"]["batch_seconds"] for u in HistoryReader(tmp_path / "ref").units())
    stats = kill_and_resume(_generate_argv(tmp_path / "killed"), tmp_path / "killed", total_units=8, kills=5,
                            unit_seconds=unit_seconds, seed=0, probe=read_with_globs)
    assert stats["killed"] == 5, stats  # every kill landed while a unit was being written
    assert stats["probe_failures"] == 0, stats["probe_errors"]
    assert stats["probe_reads"] >= 2 * 5 + 1, stats  # read during every run and after every kill
    assert read_with_globs(tmp_path / "killed") == {"duckdb": 8 * 40_000, "polars": 8 * 40_000}
    assert stats["units_after_kill"] == sorted(stats["units_after_kill"]) and stats["units_after_kill"][-1] < 8
    assert transition_diff(tmp_path / "ref", tmp_path / "killed") == (0, 0)  # none lost, none duplicated
    assert content_hash(tmp_path / "killed") == content_hash(tmp_path / "ref")
    assert HistoryReader(tmp_path / "killed").num_transitions() == 8 * 40_000


# ---------------------------------------------------------------------------- training
TRAIN = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--n-ff", "32", "--context", "20", "--warmup-steps",
         "2", "--val-batches", "2", "--log-every", "1", "--progress", "false", "--threads", "1", "--accelerator", "cpu"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from benchmarks.helpers.synthetic_goals import write_synthetic_dataset

    return write_synthetic_dataset(tmp_path_factory.mktemp("data") / "syn", num_tasks=3, length=200)


def _scalars(run: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tb"))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_ddp_on_two_cpu_processes_follows_the_one_process_loss(dataset, tmp_path):
    """Same global batch of 8 windows: 1 process x 8 vs 2 processes x 4 (gloo); held-out loss after every step."""
    common = ["train", "rl", "--data", str(dataset), *TRAIN, "--batch-size", "8", "--max-steps", "10",
              "--val-every", "1", "--checkpoint-every", "5"]
    subprocess.run(ad_command(*common, "--out", str(tmp_path / "one")), check=True, capture_output=True)
    two = subprocess.run(ad_command(*common, "--out", str(tmp_path / "two"), "--devices", "2"), capture_output=True,
                         text=True)
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("model saved") == 1  # the second process saves nothing
    one_loss, two_loss = _scalars(tmp_path / "one", "val/loss"), _scalars(tmp_path / "two", "val/loss")
    assert len(one_loss) == len(two_loss) == 10
    for (step_a, a), (step_b, b) in zip(one_loss, two_loss):
        assert step_a == step_b and b == pytest.approx(a, rel=1e-4, abs=1e-5)
    assert one_loss[0][1] != one_loss[-1][1]  # it did train
    from safetensors.torch import load_file

    w1, w2 = load_file(tmp_path / "one/model/model.safetensors"), load_file(tmp_path / "two/model/model.safetensors")
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 1e-3


def test_train_killed_after_a_checkpoint_resumes_from_it(dataset, tmp_path):
    out = tmp_path / "run"
    argv = ad_command("train", "rl", "--data", str(dataset), "--out", str(out), *TRAIN, "--batch-size", "4",
                      "--max-steps", "400", "--val-every", "0", "--checkpoint-every", "20")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not glob.glob(str(out / "checkpoints" / "step=*.ckpt")):
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    killed_at = ckpt["global_step"]
    assert 20 <= killed_at < 400
    resumed = subprocess.run([*argv, "--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    adam_step = float(next(iter(final["optimizer_states"][0]["state"].values()))["step"])
    assert final["global_step"] == 400 and adam_step == 400  # continued from the checkpoint, not restarted
    losses = _scalars(out, "train/loss")
    assert losses[-1][0] == 399
