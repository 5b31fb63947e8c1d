"""benchmarks/lm_pretraining.py: the two LMs get the same budget and text, and each command line is one `ad train lm`
accepts (checked with --print-config, which resolves and validates every option without training)."""
import argparse
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.lm_pretraining import MODELS, train_command  # noqa: E402


def test_both_models_train_on_the_same_budget_and_text(tmp_path):
    from ad.config import make_config
    from tasks.darkroom.config import GenerateConfig
    from tasks.darkroom.generate import generate

    data = generate(make_config(GenerateConfig, {"out": str(tmp_path / "darkroom"), "size": 7, "source": "explorer",
                                                 "steps_per_goal": 200, "goals": ["0,0", "6,6"],
                                                 "progress": False}))
    args = argparse.Namespace(context=30, batch_size=4, steps=50, learning_rate=5e-4, threads=1)
    configs = {}
    for model in MODELS:
        command = train_command(model, data, tmp_path / model, args, seed=3)
        assert command[:3] == ["ad", "train", "lm"]
        out = subprocess.run([sys.executable, "-m", "ad", *command[1:], "--print-config"], capture_output=True,
                             text=True, check=True).stdout
        configs[model] = yaml.safe_load(out)
    shared = ("template", "context", "max_tokens", "batch_size", "max_steps", "learning_rate", "warmup_steps",
              "subsample", "stride", "loss_on", "seed", "threads")
    pretrained, scratch = configs["smollm2-135m"], configs["scratch"]
    assert {k: pretrained[k] for k in shared} == {k: scratch[k] for k in shared}
    assert (pretrained["template"], pretrained["context"], pretrained["max_steps"], pretrained["seed"]) == (
        "grid7", 30, 50, 3)
    assert (pretrained["model"], pretrained["dtype"], scratch["model"], scratch["n_layer"]) == (
        "smollm2-135m", "bfloat16", "scratch", 4)
