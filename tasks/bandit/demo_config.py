"""Options of ``ad demo --task bandit`` (light to import: ``ad --help`` reads them)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ad.config import option, override
from ad.demo_pipeline import MethodsOptions, parse_methods
from ad.errors import UserError
from ad.options import RunOptions, run_options
from tasks.bandit.instances import check_arms

#: Fraction of each history that is "expert" data for ED (``ad train rl --expert-only`` keeps this much).
EXPERT_FRACTION = 0.1
#: The UCB1 source's exploration coefficient per reward kind (``--ucb-c -1``; docs/experiments/bandit.md).
UCB_C = {"bernoulli": 0.3, "gaussian": 0.5}
#: Policies of the figure, in plotting order.
POLICIES = ("AD", "ED", "Thompson", "UCB1", "random")


@dataclass
class BanditDemoConfig(MethodsOptions, run_options("out", "seed", "threads")):
    """Algorithm Distillation on k-armed bandits end to end (generate -> train AD and ED -> regret -> report.md)."""

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
    threads: int = override(RunOptions, "threads", 1)
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
        if not self.learning_rate > 0.0:
            raise UserError(f"--learning-rate must be positive, got {self.learning_rate}")

    @property
    def lr(self) -> float:
        """--learning-rate under its old name (what tasks/bandit/demo.py reads until it reads learning_rate)."""
        return self.learning_rate

    @property
    def expert_context(self) -> int:
        """ED's context: the expert part of a history (what ``--expert-only`` keeps of ``pulls`` pulls)."""
        return max(1, int(round(self.pulls * EXPERT_FRACTION)))
