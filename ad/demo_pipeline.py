"""The Algorithm Distillation demo pipeline, the same for every task family with an ``ad eval`` environment.

generate the source algorithm's learning histories on every task (``ad generate <family>``) -> train AD (the
``models/rl`` transformer on subsampled histories of the training tasks) and the expert-distillation (ED) baseline
(the same model on the histories' last episodes only) -> evaluate both in context on the held-out tasks
(``ad eval``) -> ``report.md`` with the table and the plot. Every stage resumes: re-running the command skips
finished work. ``--methods`` picks the in-context methods trained on the same histories (:data:`METHODS`: AD, ED
and DPT, the Decision-Pretrained Transformer, which learns the optimal action of every state in context).

A family plugs in by subclassing :class:`ADDemoConfig` (its ``FAMILY`` and :meth:`ADDemoConfig.generate_options`,
plus the options of its own source) and registering the subclass with :func:`run` through
:func:`ad.families.register_family` (``demo_config=..., demo=lazy_function("ad.demo_pipeline:run")``).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal

from ad.config import make_config, option, override
from ad.errors import UserError
from ad.options import RunOptions, run_options


#: In-context methods a demo can train on the same histories (``--methods``): name -> label in the report. Each is
#: the ``ad train rl --objective`` of the same name.
METHODS = {"ad": "AD", "ed": "ED", "dpt": "DPT"}


def parse_methods(items: Any) -> list[str]:
    """``--methods`` as a list of :data:`METHODS` names: items may be comma-separated (``ad,dpt,ed``); a UserError
    for an unknown, repeated or missing method."""
    names = [part.strip().lower() for item in ([items] if isinstance(items, str) else items)
             for part in str(item).split(",") if part.strip()]
    unknown = [name for name in names if name not in METHODS]
    if unknown or not names or len(set(names)) < len(names):
        what = f"unknown method {unknown[0]!r}" if unknown else "no method" if not names else "a repeated method"
        raise UserError(f"--methods {','.join(names)}: {what}; choose one or more of {', '.join(METHODS)} "
                        "(e.g. --methods ad,dpt,ed)")
    return names


@dataclass
class MethodsOptions:
    """The in-context methods a demo trains and compares (every demo shares these options)."""

    methods: list[str] = option(["ad", "ed"], "in-context methods trained on the same histories and compared on the "
                                              "same held-out tasks: ad, ed (expert distillation), dpt "
                                              "(Decision-Pretrained Transformer), e.g. --methods ad,dpt,ed")
    dpt_steps: int = option(0, "optimiser steps for DPT; 0 = the same as AD's")
    dpt_data: Literal["source", "random"] = option(
        "source", "histories DPT trains on: source = the demo's own (AD's); random = `ad generate <family> --source "
                  "random` contexts on the same tasks and split, each history acting from its own drawn action "
                  "distribution (the DPT paper's pretraining data)")


#: ``ad generate <family> --source random`` options of a grid demo's DPT contexts beside the demo's own: episodes start
#: in a random cell, so a context covers the room as the DPT paper's (uniformly drawn states) do
RANDOM_CONTEXTS = {"random_start": True}


def dpt_runs_on_random(config: Any) -> bool:
    """Whether ``config`` (a demo's options) trains DPT on random contexts instead of the demo's histories."""
    return "dpt" in config.methods and config.dpt_data == "random"


def method_runs(methods: list[str], options: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(label, ``ad train rl`` options) of each of ``methods``: ``options[name]`` plus its ``objective``."""
    return [(METHODS[name], {**options[name], "objective": name}) for name in methods]


@dataclass
class ADDemoConfig(MethodsOptions, run_options("out", "seed", "threads")):
    """Options every AD demo shares (a family's subclass adds its source's options and sets ``FAMILY``)."""

    #: the task family whose ``ad generate`` command and ``ad eval`` environment the demo uses
    FAMILY: ClassVar[str] = ""
    #: how the report names the task
    TITLE: ClassVar[str] = ""
    #: episode ranges of the report's table beside the first 5 and the last 10 (the figures the family's docs quote)
    REPORT_WINDOWS: ClassVar[tuple[tuple[int, int], ...]] = ((36, 40),)

    out: str = override(RunOptions, "out", "data/demo", "the folder of the dataset, the runs, the evaluation and "
                                                        "report.md")
    subsample: int = option(40, "AD trains on every k-th episode of each history (the AD paper's subsampling): "
                                "a history that improves k times faster per episode than its source")
    context: int = option(80, "transformer context in transitions")
    ad_steps: int = option(5000, "optimiser steps for AD")
    ed_steps: int = option(2000, "optimiser steps for the expert-distillation baseline")
    model_preset: str = option("demo", "model/training preset of `ad train rl`")
    dropout: float = option(-1.0, "dropout of AD and ED on attention weights and on each block's output (`ad train rl "
                                  "--attn-dropout / --resid-dropout`, replacing the preset's); -1 = the task family's "
                                  "default (DarkRoom: 0.1 up to 7x7, 0 above; Key-to-Door: 0)")
    episodes: int = option(100, "episodes in context at evaluation")
    seeds: int = option(3, "evaluation seeds per held-out task")
    threads: int = override(RunOptions, "threads", 1)
    train_overrides: dict = option({}, "extra `ad train rl` options for both runs (YAML/JSON config only)")

    def __post_init__(self) -> None:
        self.methods = parse_methods(self.methods)
        for name in ("subsample", "context", "ad_steps", "ed_steps", "episodes", "seeds"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.threads < 0 or self.dpt_steps < 0:
            raise UserError(f"--threads and --dpt-steps must be >= 0, got {self.threads} and {self.dpt_steps}")
        if not (0.0 <= self.dropout < 1.0 or self.dropout == -1.0):  # also refuses NaN
            raise UserError(f"--dropout must be in [0, 1), or -1 for the task family's default, got {self.dropout}")

    def generate_options(self) -> dict[str, Any]:
        """Options of ``ad generate <FAMILY>`` for this demo (``out`` is set by the pipeline)."""
        raise NotImplementedError(f"{type(self).__name__} must define generate_options()")

    def family_dropout(self) -> float:
        """The dropout ``--dropout -1`` stands for (a family overrides it with its measured choice)."""
        return 0.0

    def train_options(self) -> dict[str, Any]:
        """``ad train rl`` options both runs share (``data`` and ``out`` are set by the pipeline)."""
        dropout = self.family_dropout() if self.dropout == -1.0 else self.dropout
        return {"preset": self.model_preset, "context": self.context, "seed": self.seed, "threads": self.threads,
                "attn_dropout": dropout, "resid_dropout": dropout}

    def runs(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, extra ``ad train rl`` options) of each trained policy of ``methods``: AD (on every
        ``subsample``-th episode), its ED baseline, DPT (AD's windows, the optimal actions as targets)."""
        return method_runs(self.methods, {
            "ad": {"max_steps": self.ad_steps, "subsample": self.subsample},
            "ed": {"max_steps": self.ed_steps},
            "dpt": {"max_steps": self.dpt_steps or self.ad_steps, "subsample": self.subsample}})


def stage(name: str, timings: dict[str, float], fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` as one named stage of a demo: print a header, record its wall time in ``timings``."""
    print(f"\n=== {name} ===", flush=True)
    start = time.perf_counter()
    result = fn(*args)
    timings[name] = time.perf_counter() - start
    return result


def train_policies(data: Path, out: Path, runs: list[tuple[str, dict[str, Any]]], common: dict[str, Any],
                   timings: dict[str, float]) -> dict[str, Path]:
    """``ad train rl`` once per (label, options) of ``runs`` into ``out/<label lowercased>`` on ``data`` (or the
    run's own ``data`` option); a finished run is
    skipped, an interrupted one resumes from its last checkpoint. Returns label -> run folder."""
    from ad import registry

    train = registry.get("train", "rl")
    folders: dict[str, Path] = {}
    for label, extra in runs:
        run_dir = folders[label] = out / label.lower()
        if (run_dir / "model" / "config.json").is_file():
            print(f"{label}: {run_dir / 'model'} exists, skipping training (delete it to retrain)")
            timings[f"train {label}"] = 0.0
            continue
        cfg = make_config(train.config_cls, {**common, "data": str(data), **extra, "out": str(run_dir),
                                             "resume": (run_dir / "checkpoints" / "last.ckpt").is_file()},
                          source=f"demo train {label} options")
        stage(f"train {label}", timings, train.run, cfg)
    return folders


def run_ad_demo(config: ADDemoConfig) -> Path:
    """The whole pipeline for ``config.FAMILY``; returns the path of ``report.md``."""
    from ad import registry
    from ad.commands.evaluate import EvalConfig, evaluate
    from ad.report import write_report

    family = config.FAMILY
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    data = out / family
    timings: dict[str, float] = {}

    generate = registry.get("generate", family)
    gen_cfg = make_config(generate.config_cls, {**config.generate_options(), "out": str(data)},
                          source="demo generate options")
    stage("generate the source's learning histories", timings, generate.run, gen_cfg)
    planned = config.runs()
    if dpt_runs_on_random(config):  # the same tasks and split, random contexts for DPT (all of them, no subsampling)
        random_cfg = make_config(generate.config_cls, {**config.generate_options(), "source": "random",
                                                       **RANDOM_CONTEXTS, "out": str(out / f"{family}-random")},
                                 source="demo generate options (random contexts)")
        stage("generate random contexts for DPT", timings, generate.run, random_cfg)
        planned = [(label, {**extra, "data": random_cfg.out, "subsample": 1} if label == METHODS["dpt"] else extra)
                   for label, extra in planned]

    common = {**config.train_options(), **config.train_overrides}
    runs = train_policies(data, out, planned, common, timings)

    (first, first_run), *others = runs.items()
    eval_cfg = EvalConfig(ckpt=str(first_run), name=first, models=[f"{label}={path}" for label, path in others],
                          data=str(data), episodes=config.episodes, seeds=config.seeds, seed=config.seed,
                          out=str(out / "eval"))
    summary = stage("evaluate in context", timings, evaluate, eval_cfg)
    timings["total"] = sum(timings.values())
    images = {"in-context return on held-out tasks": "eval/in_context.png"}
    if (data / "learning_curves.png").is_file():
        images["source learning curves"] = f"{family}/learning_curves.png"
    report = write_report(out, summary, timings, asdict(config), images, task=config.TITLE or family,
                          windows=config.REPORT_WINDOWS, methods=list(runs))
    print(f"\nwrote {report}")
    return report


def run(config: ADDemoConfig) -> int:
    """``ad demo --task <family>`` entry point."""
    run_ad_demo(config)
    return 0
