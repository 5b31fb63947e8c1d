"""`ad demo`: Algorithm Distillation end to end on DarkRoom, on small CPU settings.

generate A2C learning histories on every goal -> train AD (subsampled histories) and the
expert-distillation baseline -> evaluate both in context on held-out goals -> report.md.
Every stage resumes: re-running the command skips finished work.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ad.config import make_config, option
from ad.errors import UserError
from ad.registry import register


@dataclass
class DemoConfig:
    """Algorithm Distillation on DarkRoom end to end (generate -> train AD and ED -> evaluate -> report)."""

    out: str = option("data/demo", "folder for the dataset, both runs, the evaluation and report.md")
    size: int = option(9, "DarkRoom side length")
    steps_per_goal: int = option(240_000, "A2C env steps per goal (the fast preset learns every goal in ~50k; "
                                          "longer histories give AD more learning-to-converged windows)")
    generate_preset: str = option("fast", "A2C preset of `ad generate darkroom`")
    terminate_on_goal: bool = option(False, "end episodes at the goal (the `ad generate darkroom` default) instead of rewarding every step "
                                            "spent there (the AD paper's Dark Room)")
    subsample: int = option(40, "AD trains on every k-th episode of each history (the AD paper's subsampling): "
                                "a history that improves k times faster per episode than its source")
    context: int = option(80, "transformer context in transitions")
    ad_steps: int = option(5000, "optimiser steps for AD")
    ed_steps: int = option(2000, "optimiser steps for the expert-distillation baseline")
    model_preset: str = option("demo", "model/training preset of `ad train rl`")
    episodes: int = option(100, "episodes in context at evaluation")
    seeds: int = option(3, "evaluation seeds per held-out goal")
    threads: int = option(1, "torch CPU threads (1 is fastest for these small models on 2 shared cores)")
    seed: int = option(0, "seed of every stage")
    train_overrides: dict = option({}, "extra `ad train rl` options for both runs (YAML/JSON config only)")

    def __post_init__(self) -> None:
        for name in ("steps_per_goal", "subsample", "context", "ad_steps", "ed_steps", "episodes", "seeds"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")


def _stage(name: str, timings: dict[str, float], fn, *args):
    print(f"\n=== {name} ===", flush=True)
    start = time.perf_counter()
    result = fn(*args)
    timings[name] = time.perf_counter() - start
    return result


def demo(config: DemoConfig) -> Path:
    """Run the whole pipeline; returns the path of report.md."""
    from ad import registry
    from ad.commands.evaluate import EvalConfig, evaluate
    from ad.report import write_report

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    data, ad_run, ed_run = out / "darkroom", out / "ad", out / "ed"
    timings: dict[str, float] = {}

    generate = registry.get("generate", "darkroom")
    gen_cfg = make_config(generate.config_cls, {"out": str(data), "size": config.size, "seed": config.seed,
                                                "steps_per_goal": config.steps_per_goal,
                                                "terminate_on_goal": config.terminate_on_goal,
                                                "preset": config.generate_preset, "threads": config.threads},
                          source="demo generate options")
    _stage("generate A2C learning histories", timings, generate.run, gen_cfg)

    train = registry.get("train", "rl")
    common = {"data": str(data), "preset": config.model_preset, "context": config.context, "seed": config.seed,
              "threads": config.threads, **config.train_overrides}
    for label, run_dir, extra in (("AD", ad_run, {"max_steps": config.ad_steps, "subsample": config.subsample}),
                                  ("ED", ed_run, {"max_steps": config.ed_steps, "expert_only": True})):
        if (run_dir / "model" / "config.json").is_file():
            print(f"{label}: {run_dir / 'model'} exists, skipping training (delete it to retrain)")
            timings[f"train {label}"] = 0.0
            continue
        cfg = make_config(train.config_cls, {**common, **extra, "out": str(run_dir),
                                             "resume": (run_dir / "checkpoints" / "last.ckpt").is_file()},
                          source=f"demo train {label} options")
        _stage(f"train {label}", timings, train.run, cfg)

    eval_cfg = EvalConfig(ckpt=str(ad_run), baseline=str(ed_run), data=str(data), episodes=config.episodes,
                          seeds=config.seeds, seed=config.seed, out=str(out / "eval"))
    summary = _stage("evaluate in context", timings, evaluate, eval_cfg)
    timings["total"] = sum(timings.values())
    images = {"in-context return on held-out goals": "eval/in_context.png"}
    curves = data / "learning_curves.png"
    if curves.is_file():
        images["A2C learning curves"] = "darkroom/learning_curves.png"
    report = write_report(out, summary, timings, asdict(config), images)
    print(f"\nwrote {report}")
    return report


def run(config: DemoConfig) -> int:
    demo(config)
    return 0


register("ad", "demo", DemoConfig, run, "Algorithm Distillation on DarkRoom end to end (writes report.md)")
