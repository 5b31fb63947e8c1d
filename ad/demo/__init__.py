"""The demo pipeline: one for every in-context task family and both model families (``ad demo --task T --model M``).

1. the data: the family's ``ad generate <FAMILY>`` (:meth:`DemoConfig.generate_options`) into ``<out>/<DATA>``, and
   with ``--methods dpt --dpt-data random`` (or ``transitions``) DPT's generated contexts on the same tasks and split
   (``<out>/<DATA>-random``, ``<out>/<DATA>-transitions``);
   a demo built on another demo's data runs that demo instead (:meth:`DemoConfig.make_data`);
2. each trained policy (:meth:`DemoConfig.train_runs`: AD, ED, DPT ...) with its model family's ``ad train <model>``
   into ``<out>/<folder>``; every run's options are checked before anything runs;
3. the policies in context on the held-out tasks (:meth:`DemoConfig.evaluate`; default: ``ad eval``);
4. the report (:meth:`DemoConfig.report`, written by :func:`ad.demo.report.write_report`).

Every stage resumes: re-running the command skips finished work. ``--methods`` picks the in-context methods trained
on the same histories (:data:`METHODS`). A demo is a :class:`DemoConfig` subclass (its options, class attributes and
the hooks above where its family or model differs; grid-like families subclass :class:`ADDemoConfig`), registered
by :func:`ad.families.register_family` (``demo_config=...``) or :func:`ad.registry.register_demo`.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal

from ad import registry
from ad.config import make_config, option, override, refuse
from ad.errors import UserError
from ad.config.groups import RunOptions, SamplingOptions, SamplingRuleOptions, run_options


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
class OverrideOptions:
    """Options of the ``ad generate <family>`` and ``ad train rl`` commands a demo runs, beyond those it sets itself
    (every RL-format demo shares these; a config file's mappings, not command-line flags)."""

    train_overrides: dict = option({}, "extra `ad train rl` options for every run (YAML/JSON config only)")
    generate_overrides: dict = option({}, "extra `ad generate <family>` options of the source, e.g. its learner's "
                                          "hyperparameters (YAML/JSON config only)")


@dataclass
class MethodsOptions:
    """The in-context methods a demo trains and compares (every demo shares these options)."""

    methods: list[str] = option(["ad", "ed"], "in-context methods trained on the same histories and compared on the "
                                              "same held-out tasks: ad, ed (expert distillation), dpt "
                                              "(Decision-Pretrained Transformer), e.g. --methods ad,dpt,ed")
    dpt_steps: int = option(0, "optimiser steps for DPT; 0 = the same as AD's")
    dpt_target: Literal["optimal", "posterior"] = option(
        "optimal", "DPT's target (`ad train rl --dpt-target`): optimal = the optimal action of the window's own task; "
                   "posterior = each action's probability of being optimal given the window so far, under the "
                   "family's task distribution (families that provide it: darkroom)")
    dpt_data: Literal["source", "random", "transitions", "noise"] = option(
        "source", "histories DPT trains on: source = the demo's own (AD's); random = `ad generate <family> --source "
                  "random` contexts on the same tasks and split, each history acting from its own drawn action "
                  "distribution (the DPT paper's pretraining data); transitions = independent single transitions on "
                  "the same tasks and split, each from a uniformly drawn cell with a uniformly drawn action (`ad "
                  "generate <family> --source random --random-start --episode-length 1`, the DPT paper's DarkRoom "
                  "data; rooms whose state is the agent's cell only), DPT then without the time-step embedding; "
                  "noise = `ad generate <family> --source noise` histories on the same tasks and split (the optimal "
                  "demonstrator with epsilon falling from 1 to 0 over each history: mixed-quality rollouts, from "
                  "random walks to the optimum)")

    def check_methods(self, family: str) -> None:
        """Parse ``--methods`` and refuse, before anything runs, a ``--dpt-target`` that ``family`` cannot give."""
        self.methods = parse_methods(self.methods)
        if "dpt" in self.methods and self.dpt_target == "posterior":
            registry.posterior_action_probs(family, "--dpt-target posterior")


#: What ``--temperature`` does in a demo, beside what it does in ``ad eval``.
DEMO_TEMPERATURE = ("other than 1, the evaluation, its report and its timings go to <out>/eval-temperature-<T> and "
                    "the trained models are reused")


#: What ``--sampling`` does in a demo, beside what it does in ``ad eval``.
DEMO_SAMPLING = ("other than step, the evaluation, its report and its timings go to <out>/eval-sampling-<rule> (after "
                 "the temperature's part of the name, if any) and the trained models are reused")


def eval_folder_name(temperature: float = 1.0, sampling: str = "step") -> str:
    """The folder under a demo's ``out`` of its evaluation at ``temperature`` with the ``sampling`` rule: ``eval``,
    ``eval-temperature-<T>`` for any other temperature, then ``-sampling-<rule>`` for another rule (so evaluations
    of the same models sampled in several ways sit side by side)."""
    return ("eval" + (f"-temperature-{temperature:g}" if temperature != 1.0 else "")
            + (f"-sampling-{sampling}" if sampling != "step" else ""))


def evaluation_folder_name(config: Any) -> str:
    """:func:`eval_folder_name` of a demo's options (a demo without the sampling options samples at 1, per step)."""
    return eval_folder_name(getattr(config, "temperature", 1.0), getattr(config, "sampling", "step"))


def dpt_trains_on_generated_contexts(config: Any) -> bool:
    """Whether ``config`` (a demo's options) trains DPT on contexts generated for it (``--dpt-data random``,
    ``transitions`` or ``noise``) instead of the demo's histories."""
    return "dpt" in getattr(config, "methods", ()) and config.dpt_data in ("random", "transitions", "noise")


def method_runs(methods: list[str], options: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(label, ``ad train rl`` options) of each of ``methods``: ``options[name]`` plus its ``objective``."""
    return [(METHODS[name], {**options[name], "objective": name}) for name in methods]


@dataclass(frozen=True)
class DemoRun:
    """One trained policy of a demo."""

    label: str  #: its row in the report
    folder: str  #: its run folder under the demo's ``out``
    options: dict[str, Any]  #: its ``ad train <model>`` options but ``out`` and ``resume``
    model: str = "rl"  #: the model family whose ``ad train <model>`` trains it
    done: str = "model/config.json"  #: the file a finished run has (its training is then skipped)


@dataclass
class DemoConfig:
    """The pipeline's hooks; a demo's subclass declares its options (``out``, ``seed`` ...; with
    :class:`OverrideOptions` ``train_overrides`` and ``generate_overrides``, with :class:`MethodsOptions` the
    ``--methods`` choice) and overrides what its family or model does differently (the
    defaults are those of the RL-format AD demo, :class:`ADDemoConfig`)."""

    #: the task family whose ``ad generate`` command and ``ad eval`` environment the demo uses
    FAMILY: ClassVar[str] = ""
    #: how the report names the task
    TITLE: ClassVar[str] = ""
    #: the dataset folder under ``out`` (default: the family's name)
    DATA: ClassVar[str] = ""
    #: the report's file name under ``out``
    REPORT: ClassVar[str] = "report.md"
    #: episode ranges of the report's table beside the first 5 and the last 10 (the figures the family's docs quote)
    REPORT_WINDOWS: ClassVar[tuple[tuple[int, int], ...]] = ((36, 40),)

    def data_folder(self, dpt_contexts: bool = False) -> Path:
        """The dataset the demo's policies train on (``dpt_contexts``: the contexts generated for DPT, named by
        ``--dpt-data``)."""
        return Path(self.out) / f"{self.DATA or self.FAMILY}{f'-{self.dpt_data}' if dpt_contexts else ''}"

    def results_folder(self) -> Path:
        """Where the evaluation writes its report and the stages' timings: ``out``, or for an evaluation sampled
        another way (another temperature, :class:`SamplingOptions`, or rule, :class:`SamplingRuleOptions`)
        ``out/<its eval folder>`` (:func:`eval_folder_name`), where its own files are too."""
        name = evaluation_folder_name(self)
        return Path(self.out) if name == "eval" else Path(self.out) / name

    def eval_folder(self) -> Path:
        """``<out>/eval``, or for an evaluation sampled another way ``<out>/eval-temperature-<T>`` and / or
        ``-sampling-<rule>``: where the evaluation of the demo's (RL-format) models writes ``eval.json``,
        ``eval.csv`` and ``in_context.png``."""
        return Path(self.out) / evaluation_folder_name(self)

    def generate_options(self) -> dict[str, Any]:
        """Options of ``ad generate <FAMILY>`` for this demo (``out`` is set by the pipeline)."""
        raise NotImplementedError(f"{type(self).__name__} must define generate_options()")

    def random_context_options(self) -> dict[str, Any]:
        """``ad generate <FAMILY> --source random`` options of DPT's contexts beside :meth:`generate_options` (a grid
        demo's: episodes start in a random cell, so a context covers the room as the DPT paper's drawn states do)."""
        return {"random_start": True}

    def transition_context_options(self) -> dict[str, Any]:
        """``ad generate <FAMILY> --source random`` options of DPT's independent transitions (``--dpt-data
        transitions``) beside :meth:`generate_options`; a family refuses them (the default) unless a uniformly drawn
        start cell is a uniformly drawn state of its tasks."""
        raise UserError(f"--dpt-data transitions: {self.TITLE or self.FAMILY} has no independent-transition "
                        "contexts (single steps from uniformly drawn cells, for rooms whose state is the agent's "
                        "cell, e.g. DarkRoom); use --dpt-data random or source")

    def dpt_context_options(self) -> dict[str, Any]:
        """``ad generate <FAMILY>`` options of DPT's generated contexts beside :meth:`generate_options`."""
        if self.dpt_data == "transitions":
            return {"source": "random", **self.transition_context_options()}
        if self.dpt_data == "noise":
            return {"source": "noise"}
        return {"source": "random", **self.random_context_options()}

    def make_data(self, timings: dict[str, float]) -> None:
        """Stage 1: the histories (and DPT's random contexts) with the family's ``ad generate``."""
        generate = registry.get("generate", self.FAMILY)
        stage("generate the source's learning histories", timings, generate.run, self.generate_config())
        if dpt_trains_on_generated_contexts(self):  # the same tasks and split, generated contexts for DPT
            stage(f"generate DPT's contexts (--dpt-data {self.dpt_data})", timings, generate.run,
                  self.generate_config(dpt_contexts=True))

    def check_data(self) -> None:
        """Check stage 1's options before anything runs (a UserError where one is bad)."""
        self.generate_config()

    def generate_config(self, dpt_contexts: bool = False) -> Any:
        """The checked ``ad generate <FAMILY>`` config of the source's histories (``dpt_contexts``: of DPT's
        generated contexts): :meth:`generate_options` with ``generate_overrides`` (:class:`OverrideOptions`); a
        UserError names an option the generator does not have."""
        options = {**self.generate_options(), **self.generate_overrides}
        source = "demo generate options"
        if dpt_contexts:
            options.update(self.dpt_context_options())
            source += f" (--dpt-data {self.dpt_data})"
        return make_config(registry.get("generate", self.FAMILY).config_cls,
                           {**options, "out": str(self.data_folder(dpt_contexts))}, source=source)

    def train_options(self) -> dict[str, Any]:
        """``ad train rl`` options every run shares (``data`` and ``out`` are set by the pipeline)."""
        raise NotImplementedError(f"{type(self).__name__} must define train_options()")

    def runs(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, ``ad train rl`` options beside :meth:`train_options`) of each method of ``methods``."""
        raise NotImplementedError(f"{type(self).__name__} must define runs()")

    def train_runs(self) -> list[DemoRun]:
        """Stage 2's runs: each of :meth:`runs` on the demo's histories with :meth:`train_options` and
        ``train_overrides`` (DPT on generated contexts with ``--dpt-data random``: all of them, no subsampling; with
        ``transitions`` also without the time-step embedding: its single-step episodes say nothing of the
        evaluation's, and the window-position embedding of ``ad train rl`` pairs a transition's state with its action
        and reward in the next token)."""
        common = {**self.train_options(), **self.train_overrides}
        data = str(self.data_folder())
        runs = []
        for label, extra in self.runs():
            if label == METHODS["dpt"] and dpt_trains_on_generated_contexts(self):
                self.dpt_context_options()  # a family without such contexts refuses them here, before anything runs
                extra = {**extra, "data": str(self.data_folder(dpt_contexts=True)), "subsample": 1}
                if self.dpt_data == "transitions":
                    extra["time_embedding"] = False
            runs.append(DemoRun(label, label.lower(), {**common, "data": data, **extra}))
        return runs

    def evaluate(self, folders: dict[str, Path]) -> dict[str, Any]:
        """Stage 3: ``ad eval`` of the trained policies (label -> run folder) on the held-out tasks into
        ``<out>/eval`` (at another temperature: :meth:`results_folder`); returns its summary (``eval.json``)."""
        from ad.commands.evaluate import EvalConfig, evaluate

        (first, first_run), *others = folders.items()
        return evaluate(EvalConfig(ckpt=str(first_run), name=first, data=str(self.data_folder()),
                                   models=[f"{label}={path}" for label, path in others], episodes=self.episodes,
                                   seeds=self.seeds, seed=self.seed, temperature=self.temperature,
                                   sampling=getattr(self, "sampling", "step"),
                                   out=str(self.eval_folder())))

    def report(self, summary: dict[str, Any], timings: dict[str, float], methods: list[str]) -> Path:
        """Stage 4: ``<out>/<REPORT>`` of :meth:`evaluate`'s summary (``methods``: the trained policies' labels)."""
        from ad.demo.report import in_context_lines, methods_heading, write_report

        folder = self.results_folder()
        images = {"in-context return on held-out tasks":
                  os.path.relpath(self.eval_folder() / "in_context.png", folder)}
        if (self.data_folder() / "learning_curves.png").is_file():
            images["source learning curves"] = os.path.relpath(self.data_folder() / "learning_curves.png", folder)
        heading = f"{methods_heading(methods)} on {self.TITLE or self.FAMILY}: in-context evaluation"
        return write_report(folder / self.REPORT, heading,
                            in_context_lines(summary, self.REPORT_WINDOWS, methods), images, timings, asdict(self))


@dataclass
class ADDemoConfig(DemoConfig, OverrideOptions, MethodsOptions, SamplingOptions, SamplingRuleOptions,
                   run_options("out", "seed", "threads")):
    """Options every AD demo of a grid-like family shares (a family's subclass adds its source's options, sets
    ``FAMILY`` and defines ``generate_options``)."""

    out: str = override(RunOptions, "out", "data/demo", "the folder of the dataset, the runs, the evaluation and "
                                                        "report.md")
    subsample: int = option(40, "AD trains on every k-th episode of each history (the AD paper's subsampling): "
                                "a history that improves k times faster per episode than its source")
    context: int = option(80, "transformer context in transitions")
    ad_steps: int = option(5000, "optimiser steps for AD")
    ed_steps: int = option(2000, "optimiser steps for the expert-distillation baseline")
    ad_init_from: str = option("", "start AD from the weights of a finished `ad train rl` run (its folder, holding "
                                   "model/; `ad train rl --init-from`) instead of from scratch; ED and DPT start from "
                                   "scratch")
    model_preset: str = option("demo", "model/training preset of `ad train rl`")
    dropout: float = option(-1.0, "dropout of AD and ED on attention weights and on each block's output (`ad train rl "
                                  "--attn-dropout / --resid-dropout`, replacing the preset's); -1 = the task family's "
                                  "default (DarkRoom: 0.1 up to 7x7, 0 above; Key-to-Door: 0)")
    episodes: int = option(100, "episodes in context at evaluation")
    seeds: int = option(3, "evaluation seeds per held-out task")
    temperature: float = override(SamplingOptions, "temperature", 1.0, DEMO_TEMPERATURE)
    sampling: Literal["step", "episode"] = override(SamplingRuleOptions, "sampling", "step", DEMO_SAMPLING)
    threads: int = override(RunOptions, "threads", 1)

    def __post_init__(self) -> None:
        self.check_methods(self.FAMILY)
        refuse(self, ("subsample", "context", "ad_steps", "ed_steps", "episodes", "seeds"), lambda v: v <= 0,
               "must be positive")
        if self.threads < 0 or self.dpt_steps < 0:
            raise UserError(f"--threads and --dpt-steps must be >= 0, got {self.threads} and {self.dpt_steps}")
        self.check_temperature()
        if not (0.0 <= self.dropout < 1.0 or self.dropout == -1.0):  # also refuses NaN
            raise UserError(f"--dropout must be in [0, 1), or -1 for the task family's default, got {self.dropout}")
        if self.ad_init_from:
            from ad.files import require_trained_model

            require_trained_model(self.ad_init_from, "--ad-init-from")

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
            "ad": {"max_steps": self.ad_steps, "subsample": self.subsample,
                   **({"init_from": self.ad_init_from} if self.ad_init_from else {})},
            "ed": {"max_steps": self.ed_steps},
            "dpt": {"max_steps": self.dpt_steps or self.ad_steps, "subsample": self.subsample,
                    "dpt_target": self.dpt_target}})


def stage(name: str, timings: dict[str, float], fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` as one named stage of a demo: print a header, record its wall time in ``timings``."""
    print(f"\n=== {name} ===", flush=True)
    start = time.perf_counter()
    result = fn(*args)
    timings[name] = time.perf_counter() - start
    return result


def plan_training(runs: list[DemoRun], out: Path) -> list[tuple[DemoRun, Path, Any]]:
    """(run, run folder ``out/<folder>``, its checked ``ad train <model>`` config) of each of ``runs``: a bad option
    stops the demo before anything runs; an interrupted run resumes from its last checkpoint."""
    planned = []
    for run in runs:
        run_dir = out / run.folder
        cfg = make_config(registry.get("train", run.model).config_cls,
                          {**run.options, "out": str(run_dir),
                           "resume": (run_dir / "checkpoints" / "last.ckpt").is_file()},
                          source=f"demo train {run.label} options")
        planned.append((run, run_dir, cfg))
    return planned


def train_policies(planned: list[tuple[DemoRun, Path, Any]], timings: dict[str, float]) -> dict[str, Path]:
    """Train each run of :func:`plan_training` with its model family's ``ad train <model>`` (a finished run is
    skipped); returns label -> run folder."""
    folders: dict[str, Path] = {}
    for run, run_dir, cfg in planned:
        folders[run.label] = run_dir
        if (run_dir / run.done).is_file():
            print(f"{run.label}: {run_dir / 'model'} exists, skipping training (delete it to retrain)")
            timings[f"train {run.label}"] = 0.0
            continue
        stage(f"train {run.label}", timings, registry.get("train", run.model).run, cfg)
    return folders


#: The wall time of each stage of a demo (seconds, and "total"), written beside its report.
TIMINGS_FILE = "timings.json"


def run_ad_demo(config: DemoConfig) -> Path:
    """The whole pipeline of one demo (module docstring); returns the path of its report."""
    out = Path(config.out)
    planned = plan_training(config.train_runs(), out)
    config.check_data()  # a bad source option stops the demo before anything is written
    timings: dict[str, float] = {}
    out.mkdir(parents=True, exist_ok=True)
    config.make_data(timings)
    folders = train_policies(planned, timings)
    summary = stage("evaluate in context", timings, config.evaluate, folders)
    timings["total"] = sum(timings.values())
    from ad.files import write_json_atomic

    config.results_folder().mkdir(parents=True, exist_ok=True)
    write_json_atomic(config.results_folder() / TIMINGS_FILE,
                      {"seconds": timings, "threads": getattr(config, "threads", None)})
    report = config.report(summary, timings, list(folders))
    print(f"\nwrote {report}")
    return report


def run(config: DemoConfig) -> int:
    """``ad demo --task <family> --model <model>`` entry point."""
    run_ad_demo(config)
    return 0
