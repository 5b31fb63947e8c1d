"""`ad eval` end to end on a tiny 3x3 DarkRoom: files written, a trained model beats random, bad input exits 2."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ad import registry
from ad.config import make_config
from ad.errors import UserError


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 3x3 DarkRoom dataset and a small AD model trained on it."""
    root = tmp_path_factory.mktemp("eval")
    generate = registry.get("generate", "darkroom")
    generate.run(make_config(generate.config_cls, dict(
        out=str(root / "data"), size=3, episode_length=10, steps_per_goal=20_000, preset="fast",
        terminate_on_goal=False, heldout_fraction=0.25, progress=False, plots=False, tensorboard=False)))
    train = registry.get("train", "rl")
    train.run(make_config(train.config_cls, dict(
        data=str(root / "data"), out=str(root / "ad"), context=30, subsample=4, max_steps=400, batch_size=16,
        n_layer=1, n_embd=32, n_ff=64, n_head=2, warmup_steps=20, val_every=0, progress=False, threads=1)))
    return root


@pytest.mark.slow
def test_trained_model_beats_random_and_cli_writes_files(trained, tmp_path):
    out = tmp_path / "eval"
    proc = subprocess.run([sys.executable, "-m", "ad", "eval", "--ckpt", str(trained / "ad"), "--data",
                           str(trained / "data"), "--episodes", "12", "--seeds", "2", "--split", "all",
                           "--progress", "false", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in ("eval.json", "eval.csv", "in_context.png"):
        assert (out / name).stat().st_size > 100
    summary = json.loads((out / "eval.json").read_text())
    ad, random = summary["policies"]["AD"], summary["policies"]["random"]
    returns = np.array(ad["returns"])
    assert returns.shape == (len(summary["tasks"]), 2, 12)
    assert np.mean(ad["normalised"][-6:]) > np.mean(random["normalised"][-6:]) + 0.1  # measured: 0.40 vs 0.10
    assert "source" in summary["policies"]


@pytest.mark.slow
def test_eval_bad_inputs(trained, tmp_path):
    from ad.commands.evaluate import EvalConfig, evaluate
    from benchmarks.helpers.synthetic import write_synthetic

    with pytest.raises(UserError, match="--episodes must be positive"):
        EvalConfig(ckpt=str(trained / "ad"), data=str(trained / "data"), episodes=0)
    other = tmp_path / "other"  # a 5x5 room: 25 states, the checkpoint knows 9
    generate = registry.get("generate", "darkroom")
    generate.run(make_config(generate.config_cls, dict(out=str(other), size=5, steps_per_goal=2_000, preset="fast",
                                                       progress=False, plots=False, tensorboard=False)))
    with pytest.raises(UserError, match="different tasks"):
        evaluate(EvalConfig(ckpt=str(trained / "ad"), data=str(other), episodes=2, progress=False,
                            out=str(tmp_path / "e1")))
    no_heldout = tmp_path / "noheld"
    generate.run(make_config(generate.config_cls, dict(out=str(no_heldout), size=3, episode_length=10,
                                                       steps_per_goal=2_000, preset="fast", heldout_fraction=0.0,
                                                       progress=False, plots=False, tensorboard=False)))
    with pytest.raises(UserError, match="no heldout tasks"):
        evaluate(EvalConfig(ckpt=str(trained / "ad"), data=str(no_heldout), episodes=2, progress=False,
                            out=str(tmp_path / "e2")))
    synthetic = tmp_path / "syn"
    write_synthetic(synthetic, num_tasks=2, num_streams=1, length=200)
    proc = subprocess.run([sys.executable, "-m", "ad", "eval", "--ckpt", str(trained / "ad"), "--data",
                           str(synthetic), "--episodes", "2"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
