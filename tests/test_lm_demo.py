"""`ad demo --model lm`: registered without importing torch, options checked, the report combines the RL-format
and Language-format evaluations of the same held-out goals into one table and one plot."""
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ad.config import make_config
from ad.demo import plan_training
from ad.errors import UserError
from models.lm.config import TrainLMConfig
from models.lm.demo_config import LMDemoConfig


def test_registered_as_a_demo_without_importing_torch():
    code = ("import sys; from ad import registry; cmd = registry.get_demo('darkroom', 'lm'); "
            "print(cmd.config_cls.__name__, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["LMDemoConfig", "False"]


@pytest.mark.parametrize("bad", [{"lm": "gpt2"}, {"ad_steps": -1}, {"learning_rate": float("nan")},
                                 {"learning_rate": float("inf")}, {"subsample": -1}, {"watch_every": -1},
                                 {"seeds": 0}, {"source": "ppo"}])
def test_bad_options_are_refused(bad):
    with pytest.raises(UserError):
        make_config(LMDemoConfig, bad)


@pytest.mark.parametrize("values, expected", [
    ({}, ("explorer", 100, 100, 1, 2000, 500, 16)), ({"source": "a2c"}, ("a2c", 80, 80, 40, 2000, 1000, 16)),
    ({"context": 60, "ed_steps": 7}, ("explorer", 60, 60, 1, 2000, 7, 16)),
    ({"lm": "smollm2-135m"}, ("explorer", 40, 100, 1, 160, 80, 8)),
    ({"lm": "smollm2-135m", "source": "a2c", "context": 20, "batch_size": 2}, ("a2c", 20, 80, 40, 160, 80, 2)),
    ({"rl_context": 30, "ad_steps": 9}, ("explorer", 100, 30, 1, 9, 500, 16))])
def test_options_left_at_zero_take_the_source_and_lm_default(values, expected):
    """The scratch LM and the RL-format AD read the same windows unless --rl-context says otherwise; the pretrained
    LM gets a CPU budget of its own while the RL-format AD keeps the source's context."""
    config = make_config(LMDemoConfig, values)
    assert (config.source, config.context, config.rl_context, config.subsample, config.ad_steps, config.ed_steps,
            config.batch_size) == expected


def test_the_pretrained_lm_reads_the_scratch_lms_text_in_bfloat16(tmp_path):
    from models.lm.config import TrainLMConfig
    from models.lm.demo import lm_options

    config = make_config(LMDemoConfig, {"out": str(tmp_path), "lm": "smollm2-135m"})
    train = make_config(TrainLMConfig, {**lm_options(config, tmp_path / "darkroom"), "out": str(tmp_path / "lm")})
    assert (train.model, train.template, train.dtype, train.loss_on, train.context, train.max_tokens,
            train.batch_size, train.warmup_steps) == ("smollm2-135m", "grid9", "bfloat16", "all", 40, 400, 8, 16)


def _run_without_work(config, monkeypatch):
    """Run the LM demo through the pipeline with every stage's work replaced: returns what each stage was given (the
    RL-format demo's config, each `ad train` config by run folder, each `ad eval` config by run folder)."""
    from ad import registry
    from ad import demo as demo_pipeline
    from models.lm import demo as lm_demo

    seen = {"train": {}, "eval": {}}
    rl = registry.get_demo("darkroom", "rl")
    monkeypatch.setattr(registry, "get_demo", lambda family, model: SimpleNamespace(
        config_cls=rl.config_cls, run=lambda cfg: seen.setdefault("rl", cfg)))
    monkeypatch.setattr(demo_pipeline, "stage", lambda name, timings, fn, *args: fn(*args))
    monkeypatch.setattr(registry, "get", lambda group, name: SimpleNamespace(
        config_cls=TrainLMConfig, run=lambda cfg: seen["train"].setdefault(Path(cfg.out).name, cfg)))
    for run in config.train_runs():  # finished runs, so that the evaluation sees them
        (Path(config.out) / run.folder / "model").mkdir(parents=True)
        (Path(config.out) / run.folder / "model" / "lm.json").write_text("{}")
    monkeypatch.setattr("ad.commands.evaluate.evaluate", lambda cfg: seen["eval"].setdefault(Path(cfg.ckpt).name, cfg))
    monkeypatch.setattr(lm_demo, "combined_summary", lambda rl_summary, lms: {})
    monkeypatch.setattr(lm_demo, "write_lm_report", lambda cfg, summary, timings: Path(cfg.out) / "report-lm.md")
    demo_pipeline.run_ad_demo(config)
    return seen


def test_the_rl_format_demo_gets_the_same_source_context_and_subsampling(tmp_path, monkeypatch):
    seen = _run_without_work(make_config(LMDemoConfig, {"out": str(tmp_path), "source": "a2c"}), monkeypatch)
    assert (seen["rl"].source, seen["rl"].context, seen["rl"].subsample) == ("a2c", 80, 40)
    assert seen["train"] == {}  # finished runs are not trained again
    lm, ed = plan_training(make_config(LMDemoConfig, {"out": str(tmp_path), "source": "a2c"}).train_runs(), tmp_path)
    assert (lm[2].context, lm[2].subsample, lm[2].max_steps, lm[2].expert_only) == (80, 40, 2000, False)
    assert (ed[2].subsample, ed[2].max_steps, ed[2].expert_only) == (1, 1000, True)
    assert lm[2].data == ed[2].data == str(tmp_path / "darkroom")  # the RL-format demo's histories
    assert sorted(seen["eval"]) == ["lm-scratch", "lm-scratch-ed"]


def _summary(names, level, episodes=100):
    curve = np.linspace(level / 4, level, episodes)
    row = {"first_episodes_normalised": float(curve[:5].mean()), "last_episodes_normalised": float(curve[-10:].mean()),
           "episode_40_normalised": float(curve[35:40].mean()), "final_mean_return": 1.0, "mean": curve.tolist(),
           "std": (curve * 0).tolist(), "normalised": curve.tolist()}
    return {"tasks": ["darkroom9-g0-0"], "episodes": episodes, "seeds": 3, "greedy": False,
            "optimal_mean_return": 10.0, "policies": {name: dict(row) for name in names}}


def test_report_has_every_model_of_both_formats(tmp_path):
    from models.lm.demo import combined_summary, write_lm_report

    rl = _summary(["AD", "ED", "random", "source"], 0.9)
    lms = {"lm-scratch": _summary(["LM AD (Llama from scratch)", "random", "source"], 0.8),
           "lm-scratch-ed": _summary(["LM ED (from scratch)", "random", "source"], 0.2),
           "lm-smollm2-135m": _summary(["LM AD (SmolLM2-135M + LoRA)", "random", "source"], 0.4)}
    summary = combined_summary(rl, lms)
    assert list(summary["policies"]) == ["AD", "ED (RL format)", "LM AD (Llama from scratch)",
                                         "LM ED (from scratch)", "LM AD (SmolLM2-135M + LoRA)", "random", "source"]
    (tmp_path / "report.md").write_text("the RL-format demo's report")
    report = write_lm_report(make_config(LMDemoConfig, {"out": str(tmp_path)}), summary, {"total": 1.0})
    assert report == tmp_path / "report-lm.md"
    assert (tmp_path / "report.md").read_text() == "the RL-format demo's report"  # not overwritten
    text = report.read_text()
    assert "| LM AD (Llama from scratch) | 0.212 | 0.424 | 0.773 |" in text  # episodes 1-5, 36-40, 91-100
    assert "| ED (RL format) | 0.239 | 0.477 | 0.869 |" in text
    assert "| LM AD (SmolLM2-135M + LoRA) |" in text
    assert "(eval-lm/in_context.png)" in text and (tmp_path / "eval-lm" / "in_context.png").is_file()
    json.dumps(summary)  # plain data


def test_scratch_runs_take_the_preset_depth_unless_overridden(tmp_path):
    from models.lm.config import TrainLMConfig
    from models.lm.demo import lm_options

    def train_config(**demo_options):
        config = make_config(LMDemoConfig, {"out": str(tmp_path), **demo_options})
        return make_config(TrainLMConfig, {**lm_options(config, tmp_path / "darkroom"), "out": str(tmp_path / "lm")})

    default = train_config()
    assert (default.model, default.n_layer, default.n_embd, default.template) == ("scratch", 4, 128, "auto")
    assert train_config(train_overrides={"n_layer": 2, "n_embd": 32}).n_layer == 2
    with pytest.raises(UserError):  # a misspelt override is refused, not ignored
        train_config(train_overrides={"n_layers": 2})


def test_a_misspelt_override_stops_the_demo_before_any_work(tmp_path):
    out = tmp_path / "demo"
    result = subprocess.run([sys.executable, "-m", "ad", "demo", "--model", "lm", "--out", str(out),
                             "--train-overrides", '{"n_layers": 2}'], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert "n_layers" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()  # not even the RL-format demo ran


@pytest.mark.parametrize("threads", [0, 1])
def test_lm_stages_use_every_core_unless_threads_is_set(tmp_path, monkeypatch, threads):
    """--threads 0 (the default): the LM stages take torch's default thread count (every core) and the RL-format demo
    keeps its own default; --threads N: every stage gets N."""
    import torch

    from ad import registry

    rl_default = make_config(registry.get_demo("darkroom", "rl").config_cls, {}).threads
    config = make_config(LMDemoConfig, {"out": str(tmp_path), "threads": threads})
    seen = _run_without_work(config, monkeypatch)
    lm_threads = threads or torch.get_num_threads()
    assert seen["rl"].threads == (threads or rl_default)
    assert {run.folder: run_cfg.threads for run, _, run_cfg in plan_training(config.train_runs(), tmp_path)} == {
        "lm-scratch": lm_threads, "lm-scratch-ed": lm_threads}
    assert {name: cfg.threads for name, cfg in seen["eval"].items()} == {"lm-scratch": lm_threads,
                                                                         "lm-scratch-ed": lm_threads}


#: The table of a tiny `ad demo --model lm` (below) as main gave it at commit fb12b6c, before the LM demo ran through
#: the shared demo pipeline: the RL-format rows, both LM runs, random and the source.
MAIN_FB12B6C = ["| AD | 0.040 | - | 0.039 | 0.75 |", "| ED (RL format) | 0.042 | - | 0.038 | 0.72 |",
                "| LM AD (Llama from scratch) | 0.042 | - | 0.043 | 0.81 |",
                "| LM ED (from scratch) | 0.042 | - | 0.043 | 0.81 |", "| random | 0.071 | - | 0.071 | 1.36 |",
                "| source | 0.862 | - | 0.883 | 16.65 |"]


@pytest.mark.slow
def test_tiny_lm_demo_gives_the_figures_main_gave(tmp_path, capsys):
    """The tiny RL-format demo, then the LM demo beside it (the RL-format one is found finished and kept)."""
    from ad import cli

    out = str(tmp_path / "demo")
    rl = {"n_embd": 16, "n_head": 2, "n_ff": 32, "warmup_steps": 1, "progress": False, "batch_size": 2}
    lm = {"n_layer": 1, "n_embd": 32, "n_head": 2, "n_ff": 64, "progress": False}
    assert cli.run(["demo", "--task", "darkroom", "--out", out, "--size", "5", "--seed", "1", "--streams", "4",
                    "--steps-per-goal", "800", "--ad-steps", "3", "--ed-steps", "2", "--episodes", "6", "--seeds", "1",
                    "--context", "20", "--methods", "ad,dpt,ed", "--train-overrides", json.dumps(rl)]) == 0
    assert cli.run(["demo", "--model", "lm", "--out", out, "--steps", "3", "--ed-steps", "2", "--context", "20",
                    "--episodes", "6", "--seeds", "1", "--watch-every", "0", "--threads", "1",
                    "--train-overrides", json.dumps(lm)]) == 0
    capsys.readouterr()
    text = (tmp_path / "demo" / "report-lm.md").read_text().split("## Time")[0]
    assert [line for line in text.splitlines() if line.startswith("| ") and "policy" not in line] == MAIN_FB12B6C
    # the same models again at another sampling temperature: both formats evaluated at it, beside the first files
    before = (tmp_path / "demo" / "report-lm.md").read_text()
    assert cli.run(["demo", "--model", "lm", "--out", out, "--steps", "3", "--ed-steps", "2", "--context", "20",
                    "--episodes", "6", "--seeds", "1", "--watch-every", "0", "--threads", "1", "--temperature", "0.5",
                    "--train-overrides", json.dumps(lm)]) == 0
    capsys.readouterr()
    folder = tmp_path / "demo" / "eval-temperature-0.5"
    assert (tmp_path / "demo" / "report-lm.md").read_text() == before
    rl_eval = json.loads((folder / "eval.json").read_text())
    lm_eval = json.loads((folder / "eval-lm" / "lm-scratch" / "eval.json").read_text())
    assert rl_eval["temperature"] == lm_eval["temperature"] == 0.5 and rl_eval["tasks"] == lm_eval["tasks"]
    report = (folder / "report-lm.md").read_text()
    assert "actions sampled at temperature 0.5" in report and "](eval-lm/in_context.png)" in report
    assert (folder / "eval-lm" / "in_context.png").is_file() and (folder / "timings.json").is_file()


def test_temperature_is_checked_like_ad_eval():
    with pytest.raises(UserError, match="--temperature must be a finite number > 0"):
        make_config(LMDemoConfig, {"temperature": 0.0})
    assert make_config(LMDemoConfig, {"temperature": 2}).eval_folder().name == "eval-temperature-2"
