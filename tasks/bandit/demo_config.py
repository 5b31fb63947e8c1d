"""``ad demo --task bandit``: its options and where the bandit differs in the demo pipeline (:mod:`ad.demo_pipeline`).

Light to import (``ad --help`` reads the options); the regret evaluation and its report are in
:mod:`tasks.bandit.demo`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from ad.config import option
from ad.demo_pipeline import DemoConfig, MethodsOptions, method_runs, parse_methods
from ad.errors import UserError
from tasks.bandit.instances import check_arms

#: Fraction of each history that is "expert" data for ED (``ad train rl --expert-only`` keeps this much).
EXPERT_FRACTION = 0.1
#: The UCB1 source's exploration coefficient per reward kind (``--ucb-c -1``; docs/experiments/bandit.md).
UCB_C = {"bernoulli": 0.3, "gaussian": 0.5}
#: Policies of the figure, in plotting order.
POLICIES = ("AD", "ED", "Thompson", "UCB1", "random")


@dataclass
class BanditDemoConfig(DemoConfig, MethodsOptions):
    """Algorithm Distillation on k-armed bandits end to end (generate -> train AD and ED -> regret -> report.md)."""

    FAMILY: ClassVar[str] = "bandit"
    TITLE: ClassVar[str] = "k-armed bandits"
    DATA: ClassVar[str] = "data"

    out: str = option("data/demo-bandit", "folder for the dataset, both runs, the evaluation and report.md")
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
    lr: float = option(1e-3, "peak learning rate of both models")
    random_histories: int = option(1, "with --dpt-data random: random histories per instance DPT trains on (`ad "
                                      "generate bandit --source random --histories`)")
    eval_envs: int = option(10, "evaluation runs per held-out instance (each its own reward noise)")
    threads: int = option(1, "torch CPU threads")
    seed: int = option(0, "seed of every stage; also picks the held-out instances")
    train_overrides: dict = option({}, "extra `ad train rl` options for both runs (YAML/JSON config only)")

    def __post_init__(self) -> None:
        self.methods = parse_methods(self.methods)
        check_arms(self.arms)
        for name in ("instances", "pulls", "ad_steps", "ed_steps", "batch_size", "n_layer", "eval_envs",
                     "random_histories"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.context < 0 or self.context > self.pulls:
            raise UserError(f"--context must be in 0..--pulls ({self.pulls}), got {self.context}")
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
        if not self.lr > 0.0:
            raise UserError(f"--lr must be positive, got {self.lr}")

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
        return {"seed": self.seed, "threads": self.threads, "n_layer": self.n_layer, "lr": self.lr, "val_every": 0,
                "reward_kind": "discrete" if self.kind == "bernoulli" else "continuous"}

    def runs(self) -> list[tuple[str, dict[str, Any]]]:
        """AD and DPT on whole histories (one window holds a run: the evaluation never slides it), ED on the expert
        part of each history (4x the windows per step, being 10x shorter)."""
        whole = {"context": self.context or self.pulls, "batch_size": self.batch_size}
        return method_runs(self.methods, {"ad": {"max_steps": self.ad_steps, **whole},
                                          "ed": {"max_steps": self.ed_steps, "context": self.expert_context,
                                                 "batch_size": 4 * self.batch_size},
                                          "dpt": {"max_steps": self.dpt_steps or self.ad_steps, **whole}})

    def evaluate(self, folders: dict[str, Path]) -> dict[str, Any]:
        """The expected cumulative regret of the trained policies and of the bandit algorithms on the held-out
        instances (:func:`tasks.bandit.demo.evaluate_regret`)."""
        from tasks.bandit.demo import evaluate_regret

        return evaluate_regret(self.data_folder(), folders, self.eval_envs, self.seed, self.threads)

    def report(self, summary: dict[str, Any], timings: dict[str, float], methods: list[str]) -> Path:
        """``regret.json`` (settings, timings, the regret of every policy), ``regret.png`` and ``report.md``."""
        from tasks.bandit.demo import write_results

        return write_results(Path(self.out), {"settings": asdict(self), "timings": timings, **summary}, methods)
