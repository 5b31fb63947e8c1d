"""`ad train lm` over processes: DDP and FSDP (FSDP2, gloo) on 2 CPU processes follow the one-process loss with the
same global batch, only rank 0 writes the model, and an FSDP run resumes from its checkpoint like one process."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ad.config import make_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.scale_generate import ad_command  # noqa: E402

pytestmark = pytest.mark.slow

LM = ["--context", "12", "--max-tokens", "160", "--batch-size", "4", "--warmup-steps", "2", "--decay-steps", "8",
      "--learning-rate", "1e-2", "--lora-r", "4", "--val-every", "1", "--val-batches", "1", "--checkpoint-every", "4",
      "--log-every", "2", "--progress", "false", "--threads", "1", "--accelerator", "cpu"]
TWO_PROCESSES = {"ddp": ["--devices", "2"], "fsdp": ["--devices", "2", "--strategy", "fsdp"]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from benchmarks.helpers.tiny_lm import build_tiny
    from tasks.darkroom.config import GenerateConfig
    from tasks.darkroom.generate import generate

    root = tmp_path_factory.mktemp("lm")
    model = build_tiny(root / "tiny", pad=False)
    data = generate(make_config(GenerateConfig, {"out": str(root / "dr"), "size": 3, "steps_per_goal": 400,
                                                 "hidden": 16, "progress": False, "tensorboard": False,
                                                 "plots": False, "terminate_on_goal": False}))
    return model, data


def _train(setup, out: Path, *extra: str) -> subprocess.CompletedProcess:
    model, data = setup
    argv = ad_command("train", "lm", "--data", str(data), "--model", str(model), "--out", str(out), *LM, *extra)
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _val_loss(run: Path) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tb"))
    events.Reload()
    return [e.value for e in events.Scalars("val/loss")]


def _adapter(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(run / "model" / "adapter" / "adapter_model.safetensors")


@pytest.mark.parametrize("strategy", sorted(TWO_PROCESSES))
def test_two_cpu_processes_follow_the_one_process_loss(setup, tmp_path, strategy):
    _train(setup, tmp_path / "one", "--max-steps", "8")
    two = _train(setup, tmp_path / "two", "--max-steps", "8", *TWO_PROCESSES[strategy])
    assert two.stdout.count("model saved") == 1  # the second process saves nothing
    one_loss, two_loss = _val_loss(tmp_path / "one"), _val_loss(tmp_path / "two")
    assert len(one_loss) == len(two_loss) == 8 and one_loss[0] != one_loss[-1]
    assert two_loss == pytest.approx(one_loss, rel=1e-4, abs=1e-5)
    a, b = _adapter(tmp_path / "one"), _adapter(tmp_path / "two")
    assert sorted(a) == sorted(b) and max((a[k] - b[k]).abs().max().item() for k in a) < 1e-3
    ckpt = torch.load(tmp_path / "two" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["global_step"] == 8 and all("lora_" in k for k in ckpt["state_dict"])  # full LoRA state only


def test_fsdp_run_resumes_like_one_process(setup, tmp_path):
    for name, extra in (("one", []), ("fsdp", TWO_PROCESSES["fsdp"])):
        _train(setup, tmp_path / name, "--max-steps", "4", *extra)
        _train(setup, tmp_path / name, "--max-steps", "8", "--resume", *extra)
    assert _val_loss(tmp_path / "fsdp") == pytest.approx(_val_loss(tmp_path / "one"), rel=1e-4, abs=1e-5)
    final = torch.load(tmp_path / "fsdp" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert final["global_step"] == 8
