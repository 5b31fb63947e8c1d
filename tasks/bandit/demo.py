"""Algorithm Distillation on k-armed bandits end to end: generate -> train AD and ED -> regret on held-out instances.

    from tasks.bandit.demo import run_demo
    summary = run_demo("data/demo-bandit", seed=0)          # report.md, regret.json, regret.png in that folder

The demo pipeline (:mod:`ad.demo`) with the bandit's options and hooks (:class:`BanditDemoConfig`, light to
import): ``ad generate bandit`` (UCB1 or Thompson sampling on ``instances`` bandits); ``ad train rl`` for AD on
whole histories and ED on their last 10% (with ``--methods`` also DPT, on the same histories or on random
contexts); then the expected cumulative regret in context on the held-out instances (:func:`evaluate_regret`)
of AD, ED and the bandit algorithms themselves. Every stage resumes.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from ad.config import make_config, option, override, refuse
from ad.demo import (DEMO_TEMPERATURE, DemoConfig, MethodsOptions, OverrideOptions, method_runs,
                     run_ad_demo)
from ad.errors import UserError
from ad.files import write_json_atomic
from ad.config.groups import RunOptions, SamplingOptions, run_options
from tasks.bandit.instances import check_arms

#: Fraction of each history that is "expert" data for ED (``ad train rl --expert-only`` keeps this much).
EXPERT_FRACTION = 0.1
#: The UCB1 source's exploration coefficient per reward kind (``--ucb-c -1``; docs/experiments/bandit.md).
UCB_C = {"bernoulli": 0.3, "gaussian": 0.5}
#: Policies of the figure, in plotting order.
POLICIES = ("AD", "ED", "Thompson", "UCB1", "random")


@dataclass
class BanditDemoConfig(DemoConfig, OverrideOptions, MethodsOptions, SamplingOptions,
                       run_options("out", "seed", "threads")):
    """Algorithm Distillation on k-armed bandits end to end (generate -> train AD and ED -> regret -> report.md)."""

    FAMILY: ClassVar[str] = "bandit"
    TITLE: ClassVar[str] = "k-armed bandits"
    DATA: ClassVar[str] = "data"

    out: str = override(RunOptions, "out", "data/demo-bandit", "the folder of the dataset, the runs, the evaluation "
                                                               "and report.md")
    kind: Literal["bernoulli", "gaussian"] = option("bernoulli", "reward distribution of the bandits")
    arms: int = option(5, "arms per bandit")
    instances: int = option(1000, "bandit instances (a held-out fraction is never trained on)")
    pulls: int = option(500, "pulls per source history and per in-context evaluation run")
    source: Literal["auto", "thompson", "ucb"] = option(
        "auto", "source algorithm whose histories AD distils; auto = ucb, the one AD distilled best")
    ucb_c: float = option(-1.0, "exploration coefficient of the UCB1 source (1 = the textbook bonus "
                                "sqrt(2 ln n / n_j)); -1 = the kind's default: 0.3 on Bernoulli, 0.5 on Gaussian "
                                "bandits. The evaluation shows UCB1 with this coefficient beside the textbook one")
    heldout_fraction: float = option(0.1, "fraction of the instances held out for the evaluation")
    context: int = option(0, "AD context in transitions (pulls); 0 = --pulls, a whole history")
    ad_steps: int = option(3000, "optimiser steps for AD")
    ed_steps: int = option(500, "optimiser steps for the expert-distillation baseline")
    batch_size: int = option(8, "AD windows per optimiser step (ED takes 4x as many, being 10x shorter)")
    n_layer: int = option(2, "transformer blocks of both models")
    learning_rate: float = option(1e-3, "peak learning rate of both models", aliases=("lr",))
    random_histories: int = option(1, "with --dpt-data random: random histories per instance DPT trains on (`ad "
                                      "generate bandit --source random --histories`)")
    eval_envs: int = option(10, "evaluation runs per held-out instance (each its own reward noise)")
    temperature: float = override(SamplingOptions, "temperature", 1.0, DEMO_TEMPERATURE)
    threads: int = override(RunOptions, "threads", 1)

    def __post_init__(self) -> None:
        self.check_methods(self.FAMILY)
        self.check_temperature()
        check_arms(self.arms)
        refuse(self, ("instances", "pulls", "ad_steps", "ed_steps", "batch_size", "n_layer", "eval_envs",
                      "random_histories"), lambda v: v <= 0, "must be positive")
        refuse(self, ("context",), lambda v: not 0 <= v <= self.pulls, f"must be in 0..--pulls ({self.pulls})")
        if self.threads < 0 or self.dpt_steps < 0:
            raise UserError(f"--threads and --dpt-steps must be >= 0, got {self.threads} and {self.dpt_steps}")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise UserError(f"--heldout-fraction must be in (0, 1) (the evaluation needs held-out instances), "
                            f"got {self.heldout_fraction}")
        if self.source == "auto":
            self.source = "ucb"
        if self.ucb_c == -1.0:
            self.ucb_c = UCB_C[self.kind]
        if not 0.0 <= self.ucb_c < math.inf:
            raise UserError(f"--ucb-c must be >= 0 (0 = greedy after one pull of each arm; -1 = the kind's default), "
                            f"got {self.ucb_c}")
        refuse(self, ("learning_rate",), lambda v: not v > 0.0, "must be positive")

    @property
    def expert_context(self) -> int:
        """ED's context: the expert part of a history (what ``--expert-only`` keeps of ``pulls`` pulls)."""
        return max(1, int(round(self.pulls * EXPERT_FRACTION)))

    def generate_options(self) -> dict[str, Any]:
        """Options of ``ad generate bandit``: the source on every instance."""
        return {"kind": self.kind, "arms": self.arms, "instances": self.instances, "pulls": self.pulls,
                "source": self.source, "ucb_c": self.ucb_c, "seed": self.seed,
                "heldout_fraction": self.heldout_fraction}

    def random_context_options(self) -> dict[str, Any]:
        """DPT's random contexts: ``--random-histories`` random histories per instance."""
        return {"histories": self.random_histories}

    def train_options(self) -> dict[str, Any]:
        """``ad train rl`` options of every run: rewards as tokens on Bernoulli bandits, as floats on Gaussian ones."""
        return {"seed": self.seed, "threads": self.threads, "n_layer": self.n_layer, "learning_rate": self.learning_rate, "val_every": 0,
                "reward_kind": "discrete" if self.kind == "bernoulli" else "continuous"}

    def runs(self) -> list[tuple[str, dict[str, Any]]]:
        """AD and DPT on whole histories (one window holds a run: the evaluation never slides it), ED on the expert
        part of each history (4x the windows per step, being 10x shorter)."""
        whole = {"context": self.context or self.pulls, "batch_size": self.batch_size}
        return method_runs(self.methods, {"ad": {"max_steps": self.ad_steps, **whole},
                                          "ed": {"max_steps": self.ed_steps, "context": self.expert_context,
                                                 "batch_size": 4 * self.batch_size},
                                          "dpt": {"max_steps": self.dpt_steps or self.ad_steps, **whole,
                                                  "dpt_target": self.dpt_target}})

    def evaluate(self, folders: dict[str, Path]) -> dict[str, Any]:
        """The expected cumulative regret of the trained policies and of the bandit algorithms on the held-out
        instances (:func:`tasks.bandit.demo.evaluate_regret`)."""
        return evaluate_regret(self.data_folder(), folders, self.eval_envs, self.seed, self.threads, self.temperature)

    def report(self, summary: dict[str, Any], timings: dict[str, float], methods: list[str]) -> Path:
        """``regret.json`` (settings, timings, the regret of every policy), ``regret.png`` and ``report.md``."""
        folder = self.results_folder()
        folder.mkdir(parents=True, exist_ok=True)
        return write_results(folder, {"settings": asdict(self), "timings": timings, **summary}, methods)


def run_demo(out: str | Path = "data/demo-bandit", seed: int = 0, **options: Any) -> dict[str, Any]:
    """Run the bandit demo into ``out`` (any :class:`BanditDemoConfig` option); returns the ``regret.json`` summary."""
    config = make_config(BanditDemoConfig, {"out": str(out), "seed": seed, **options}, source="bandit demo options")
    run_ad_demo(config)
    return json.loads((config.results_folder() / "regret.json").read_text())


def evaluate_regret(data: str | Path, checkpoints: dict[str, str | Path], envs_per_task: int = 2, seed: int = 0,
                    threads: int = 1, temperature: float = 1.0) -> dict[str, Any]:
    """Expected cumulative regret of trained models (``checkpoints``: label -> ``ad train`` run folder; their pulls
    sampled at ``temperature``) and of Thompson sampling, UCB1 and random pulls on the dataset's held-out instances,
    ``task_spec.pulls`` pulls each, every policy with the same instances and reward noise: per policy the mean curve,
    its standard error and the final value.
    """
    import torch

    from ad.evaluate import RandomPolicy, run_in_context
    from ad.history import HistoryReader
    from ad.registry import env_factory, load_policy
    from tasks.bandit.algorithms import VectorPolicy

    if threads:
        torch.set_num_threads(threads)
    reader = HistoryReader(data)
    meta = reader.metadata
    spec = meta["task_spec"]
    tasks = list(meta["split"]["heldout"])
    if not tasks:
        raise UserError(f"dataset {data} has no held-out instances; generate it with --heldout-fraction > 0")
    pulls, arms, kind = int(spec["pulls"]), int(spec["arms"]), spec["kind"]
    noise = float(spec.get("noise_std") or 0.5)
    policies: dict[str, Any] = {name: load_policy(path, greedy=False, seed=seed, temperature=temperature)
                                for name, path in checkpoints.items()}
    policies["Thompson"] = VectorPolicy("thompson", arms, kind, noise, seed=seed)
    policies["UCB1"] = VectorPolicy("ucb", arms, kind, noise, seed=seed)
    source = meta.get("source", {})
    ucb_c = float(source.get("config", {}).get("ucb_c", 1.0))
    if source.get("algorithm") == "ucb" and ucb_c != 1.0:  # the source itself, beside the textbook UCB1
        policies[f"UCB1 c={ucb_c:g}"] = VectorPolicy("ucb", arms, kind, noise, ucb_c=ucb_c, seed=seed)
    policies["random"] = RandomPolicy(arms, seed)
    own = {"ucb": "UCB1" if ucb_c == 1.0 else f"UCB1 c={ucb_c:g}", "thompson": "Thompson"}
    out: dict[str, Any] = {"instances": len(tasks), "runs_per_instance": envs_per_task, "pulls": pulls,
                           "temperature": temperature,
                           "source_policy": own.get(source.get("algorithm")), "policies": {}}
    for name, policy in policies.items():
        setup = env_factory("bandit")(meta, tasks, envs_per_task)
        started = time.perf_counter()
        run_in_context(policy, setup, pulls, seed=seed, name=name, progress=False)
        cumulative = setup.env.regret().cumsum(axis=1)  # (E, pulls)
        final = cumulative[:, -1]
        out["policies"][name] = {
            "final_regret": float(final.mean()), "final_regret_se": float(final.std() / np.sqrt(len(final))),
            "mean": cumulative.mean(axis=0).tolist(),
            "se": (cumulative.std(axis=0) / np.sqrt(len(final))).tolist(),
            "seconds": time.perf_counter() - started}
        print(f"{name:>9}: cumulative regret after {pulls} pulls {final.mean():7.2f} +- "
              f"{final.std() / np.sqrt(len(final)):.2f}", flush=True)
    ts = out["policies"]["Thompson"]["final_regret"]
    out["ratio_to_thompson"] = {name: row["final_regret"] / ts for name, row in out["policies"].items()}
    return out


def plot_regret(results: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Cumulative regret vs pull, mean +- one standard error, one line per policy."""
    from ad.plots import pyplot, save_figure

    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for name, row in results["policies"].items():
        mean, se = np.asarray(row["mean"]), np.asarray(row["se"])
        x = np.arange(1, len(mean) + 1)
        ax.plot(x, mean, label=f"{name} ({mean[-1]:.1f})", lw=2 if name in ("AD", "DPT") else 1.3)
        ax.fill_between(x, mean - se, mean + se, alpha=0.2)
    ax.set_title(title, fontsize=10)
    ax.legend()
    return save_figure(fig, path, ax, xlabel="pull", ylabel="cumulative expected regret", yscale="log")


def source_lines(summary: dict[str, Any]) -> list[str]:
    """AD's regret next to the regret of the algorithm whose histories it distilled, saying when AD trails it."""
    policies, source = summary["policies"], summary.get("source_policy")
    if "AD" not in policies or source not in policies:
        return []
    ad, own = policies["AD"]["final_regret"], policies[source]["final_regret"]
    ratio = ad / own if own > 0 else float("inf")
    verdict = ("AD trails its own source (more regret than the algorithm it distils)" if ad > own else
               "AD matches or beats its own source")
    return ["", f"AD's regret is {ratio:.2f}x its source's ({source}: {own:.2f}): {verdict}."]


def regret_lines(summary: dict[str, Any]) -> list[str]:
    """The body of the bandit demo's report: the held-out setting, the regret table, AD next to its source."""
    lines = [f"Held-out instances: {summary['instances']} (never in the transformer's training data), "
             f"{summary['runs_per_instance']} runs each, {summary['pulls']} pulls in context"
             f"{_tempered(summary)}.", "",
             "| policy | cumulative regret | +- s.e. | / Thompson sampling |", "|---|---|---|---|"]
    for name, row in summary["policies"].items():
        lines.append(f"| {name} | {row['final_regret']:.2f} | {row['final_regret_se']:.2f} | "
                     f"{summary['ratio_to_thompson'][name]:.2f} |")
    return lines + source_lines(summary)


def _tempered(summary: dict[str, Any]) -> str:
    """", the trained models' pulls sampled at temperature T" where T is not 1 (summaries without it sampled at 1)."""
    temperature = summary.get("temperature", 1.0)
    return "" if temperature == 1.0 else f", the trained models' pulls sampled at temperature {temperature:g}"


def write_results(out: Path, summary: dict[str, Any], methods: list[str]) -> Path:
    """``out/regret.json`` (the summary: settings, timings, every policy's regret), ``out/regret.png`` and
    ``out/report.md`` (``methods``: the trained policies' labels); returns the report's path."""
    from ad.demo.report import methods_heading, write_report

    write_json_atomic(out / "regret.json", summary, indent=1)
    settings = summary["settings"]
    plot_regret(summary, out / "regret.png",
                title=f"{settings['arms']}-armed {settings['kind']} bandits: {summary['instances']} held-out "
                      f"instances x {summary['runs_per_instance']} runs")
    return write_report(out / "report.md", f"{methods_heading(methods)} on k-armed bandits: in-context regret",
                        regret_lines(summary), {"cumulative regret": "regret.png"}, summary["timings"], settings)
