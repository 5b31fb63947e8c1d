"""`ad demo --model lm`: Algorithm Distillation in the Language format on DarkRoom, beside the RL-format AD.

The demo pipeline (:mod:`ad.demo`) with the hooks of :class:`models.lm.demo_config.LMDemoConfig`: the RL-format
demo's data, models and evaluation (``ad demo --task darkroom --model rl``, skipped when ``<out>/eval/eval.json``
exists); ``ad train lm`` on the same histories, AD (``<out>/lm-<lm>``) and ED (expert episodes only,
``<out>/lm-<lm>-ed``); ``ad eval`` of each LM on the same held-out goals (``<out>/eval-lm/<run>/``); and
``<out>/report-lm.md``, one table and one plot with every model in ``<out>``. With ``--temperature T`` other than 1
the finished runs are reused and the evaluations of both formats, the report and the plot go to
``<out>/eval-temperature-<T>/`` instead.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ad.config import make_config
from ad.demo import DemoRun, eval_folder_name
from models.lm.demo_config import LMDemoConfig


def rl_demo_size() -> int:
    """Room side of the RL-format demo this one runs (its default size; the pretrained LM's text is grid<size>),
    read from the demo the task family registered (models/ import no task)."""
    from ad import registry

    return int(registry.get_demo(LMDemoConfig.FAMILY, "rl").config_cls.size)


#: label of each LM run folder in the report (runs of other --lm values found in <out> are reported too)
LABELS = {"lm-scratch": "LM AD (Llama from scratch)", "lm-scratch-ed": "LM ED (from scratch)",
          "lm-smollm2-135m": "LM AD (SmolLM2-135M + LoRA)", "lm-smollm2-135m-ed": "LM ED (SmolLM2-135M + LoRA)"}
#: rows taken from the RL-format demo's eval.json, and their labels
RL_ROWS = {"AD": "AD", "ED": "ED (RL format)", "random": "random", "source": "source"}


def lm_threads(config: LMDemoConfig) -> int:
    """The torch threads of every LM stage: ``--threads``, or torch's default (every core) for 0."""
    import torch

    return config.threads or torch.get_num_threads()


def lm_options(config: LMDemoConfig, data: Path) -> dict[str, Any]:
    """`ad train lm` options shared by the AD and ED runs of ``config.lm``."""
    common = {"data": str(data), "context": config.context, "batch_size": config.batch_size, "learning_rate": config.learning_rate,
              "seed": config.seed, "threads": lm_threads(config), "watch_every": config.watch_every,
              "watch_seeds": 1, "val_every": 500, "checkpoint_every": 500}
    if config.lm == "scratch":
        model = {"preset": "scratch"}
    else:  # the scratch LM's text and loss, through the pretrained LM's own BPE tokenizer (~9 tokens per transition)
        model = {"model": config.lm, "dtype": "bfloat16", **grid_text_options(rl_demo_size(), config.context,
                                                                                config.ad_steps)}
    return {**common, **model, **config.train_overrides}


def grid_text_options(size: int, context: int, steps: int) -> dict[str, Any]:
    """`ad train lm` options of the pretrained LM's run (``benchmarks/lm_pretraining.py`` gives them to the scratch LM
    too): the ``grid<size>`` text, loss on every token, every window start, a 10% warm-up, checkpoints every 40."""
    return {"template": f"grid{size}", "max_tokens": 10 * context, "stride": 1, "loss_on": "all",
            "warmup_steps": max(1, steps // 10), "log_every": 10, "checkpoint_every": 40}


def rl_demo_config(config: LMDemoConfig) -> Any:
    """The options of the RL-format demo this one runs first: the same source, subsampling, held-out split and
    evaluation (its sampling temperature too), the context ``--rl-context``; its threads are ``--threads`` where
    given, else its own default."""
    from ad import registry

    options = {"out": config.out, "seed": config.seed, "source": config.source, "context": config.rl_context,
               "subsample": config.subsample, "episodes": config.episodes, "seeds": config.seeds,
               "temperature": config.temperature}
    if config.threads:
        options["threads"] = config.threads
    return make_config(registry.get_demo(config.FAMILY, "rl").config_cls, options, source="demo RL-format options")


def evaluate_rl_rows(config: LMDemoConfig) -> dict[str, Any]:
    """`ad eval` of the finished RL-format demo's models (the rows of ``<out>/eval/eval.json``, each in its run
    folder ``<out>/<label in lower case>``) at ``--temperature``, on the same held-out goals, episodes and seeds as the
    LM runs, into :meth:`LMDemoConfig.eval_folder`."""
    from ad.commands.evaluate import RESERVED_LABELS, EvalConfig, evaluate

    out = Path(config.out)
    first = json.loads((out / eval_folder_name() / "eval.json").read_text())
    (name, *others) = [label for label in first["policies"] if label not in RESERVED_LABELS]
    return evaluate(EvalConfig(ckpt=str(out / name.lower()), name=name, data=str(config.data_folder()),
                               models=[f"{label}={out / label.lower()}" for label in others],
                               episodes=config.episodes, seeds=config.seeds, seed=config.seed,
                               temperature=config.temperature, out=str(config.eval_folder()),
                               threads=lm_threads(config), progress=True))


def lm_runs(config: LMDemoConfig) -> list[DemoRun]:
    """The `ad train lm` runs of the LM (AD) and of its expert-only baseline (ED)."""
    options = lm_options(config, config.data_folder())
    runs = {f"lm-{config.lm}": {"max_steps": config.ad_steps, "subsample": config.subsample},
            f"lm-{config.lm}-ed": {"max_steps": config.ed_steps, "expert_only": True, "subsample": 1}}
    return [DemoRun(LABELS.get(name, name), name, {**options, **extra}, model="lm", done="model/lm.json")
            for name, extra in runs.items()]


def lm_eval_config(config: LMDemoConfig, run_dir: Path) -> Any:
    """The `ad eval` options of one LM run: the RL-format demo's held-out goals, seeds and episodes."""
    from ad.commands.evaluate import EvalConfig

    return EvalConfig(ckpt=str(run_dir), data=str(config.data_folder()), name=LABELS.get(run_dir.name, run_dir.name),
                      episodes=config.episodes, seeds=config.seeds, seed=config.seed, temperature=config.temperature,
                      out=str(config.results_folder() / "eval-lm" / run_dir.name), threads=lm_threads(config),
                      progress=True)


def evaluate_lms(config: LMDemoConfig) -> dict[str, Any]:
    """`ad eval` of every finished LM run in ``out`` (an evaluation newer than its model is read back), then
    :func:`combined_summary` with the RL-format demo's rows."""
    from ad.commands.evaluate import evaluate

    out = Path(config.out)
    lms = {}
    for run_dir in sorted(p for p in out.glob("lm-*") if (p / "model" / "lm.json").is_file()):
        target = config.results_folder() / "eval-lm" / run_dir.name
        if (target / "eval.json").is_file() and (target / "eval.json").stat().st_mtime > \
                (run_dir / "model" / "lm.json").stat().st_mtime:
            lms[run_dir.name] = json.loads((target / "eval.json").read_text())
            continue
        print(f"\n--- {run_dir.name} ---", flush=True)
        lms[run_dir.name] = evaluate(lm_eval_config(config, run_dir))
    rl_eval = config.eval_folder() / "eval.json"
    return combined_summary(json.loads(rl_eval.read_text()) if rl_eval.is_file() else None, lms)


def combined_summary(rl: dict[str, Any] | None, lms: dict[str, dict]) -> dict[str, Any]:
    """One ``ad eval``-style summary with the RL-format rows, every LM row, random and source."""
    first = rl or next(iter(lms.values()))
    policies: dict[str, Any] = {}
    for name, label in RL_ROWS.items():
        if rl is not None and name in rl["policies"] and name not in ("random", "source"):
            policies[label] = rl["policies"][name]
    for run, summary in lms.items():
        label = LABELS.get(run, run)
        policies[label] = summary["policies"][label]
    for name in ("random", "source"):  # the same in every summary of these goals and seeds
        if name in first["policies"]:
            policies[name] = first["policies"][name]
    return {key: first[key] for key in ("tasks", "episodes", "seeds", "greedy", "optimal_mean_return")} | {
        "temperature": first.get("temperature", 1.0), "policies": policies}


#: plot colours of the Language-format rows (their labels are drawn as "LM-AD ...", "LM-ED ...")
LM_COLOURS = {"LM-AD": "tab:red", "LM-ED": "tab:purple"}


def plot_curves(curves: dict[str, tuple[Any, Any]], optimum: float, path: Path, title: str) -> Path:
    """:func:`ad.plots.plot_in_context` with the LM rows in colours of their own (not the RL-format AD / ED's)."""
    from ad.plots import plot_in_context

    named = {name.replace("LM AD", "LM-AD").replace("LM ED", "LM-ED"): curve for name, curve in curves.items()}
    return plot_in_context(named, optimum, path, title=title, colours=LM_COLOURS)


def write_lm_report(config: LMDemoConfig, summary: dict[str, Any], timings: dict[str, float]) -> Path:
    """``<out>/report-lm.md`` (the table, the plot, timings, settings) and ``<out>/eval-lm/in_context.png``."""
    import numpy as np

    from ad.demo.report import in_context_lines, methods_heading, write_report

    out = config.results_folder()
    curves = {name: (np.asarray(row["mean"]), np.asarray(row.get("sem", row["std"])))
              for name, row in summary["policies"].items()}
    plot_curves(curves, summary["optimal_mean_return"], out / "eval-lm" / "in_context.png",
                title=f"In-context return on {len(summary['tasks'])} held-out DarkRoom goals: RL format vs "
                      "Language format")
    methods = ("AD", "ED")  # the RL-format AD is the row whose 90% episode the report names
    return write_report(out / config.REPORT, f"{methods_heading(methods)} on {config.TITLE}: in-context evaluation",
                        in_context_lines(summary, config.REPORT_WINDOWS, methods),
                        {"in-context return on held-out goals": "eval-lm/in_context.png"}, timings,
                        {**asdict(config), "threads": lm_threads(config)})
