"""Options of ``ad generate bandit`` (importing this module does not import torch)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, override, refuse
from ad.errors import UserError
from ad.config.groups import dataset_out, run_options
from ad.config.memory import check_memory
from tasks.bandit.instances import check_arms
from tasks.source_options import NoiseOptions, RandomOptions, check_noise_options, check_random_options

#: Most instances one dataset may hold (each is a unit: a partition folder with one small shard).
MAX_INSTANCES = 200_000
#: Instances per vectorised block (one generator each).
BLOCK = 512


def memory_bytes(instances: int, arms: int, pulls: int) -> int:
    """Rough peak memory of a run: one block's (instances, pulls) actions, rewards, log-probabilities and regrets
    (8 bytes each), plus one instance's history columns and their Arrow copies."""
    per_pull_row = 48 + 8 * 2 * arms  # core columns + a Gaussian observation vector
    return min(BLOCK, instances) * pulls * 4 * 8 + 3 * pulls * per_pull_row


@dataclass
class GenerateConfig(run_options("out", "seed", "progress")):
    """Run UCB1, Thompson sampling or the noisy best arm on many k-armed bandit instances at once and record every
    pull."""

    out: str = dataset_out("data/bandit")
    kind: Literal["bernoulli", "gaussian"] = option("bernoulli", "reward distribution: bernoulli (0/1 rewards with "
                                                                 "the arm's mean) or gaussian (the mean plus noise "
                                                                 "of std --noise-std)")
    arms: int = option(5, "arms per bandit (the actions); each arm's mean is drawn from U(0, 1) once per instance")
    instances: int = option(1000, "bandit instances = tasks (bandit-bern5-i00000 ...); each is one unit of the "
                                  "dataset with one history stream")
    pulls: int = option(500, "pulls per instance: the length of each learning history (one pull = one transition "
                             "= one episode)")
    source: Literal["thompson", "ucb", "noise", "random"] = option(
        "thompson", "source algorithm: thompson (Thompson sampling, Beta / normal posteriors), ucb (UCB1), noise "
                    "(noise distillation: the best arm pulled epsilon-greedily, epsilon falling over the pulls; the "
                    "--noise-* options) or random (each history pulls from its own drawn arm distribution, "
                    "independent of the means: the DPT paper's contexts; the --random-* options)")
    heldout_fraction: float = option(0.1, "fraction of the instances held out from training the transformer")
    observation: Literal["last-pull", "none"] = option(
        "last-pull", "what the env shows before each pull (the state column): last-pull = the previous pull's outcome "
                     "(Bernoulli: the index 1 + 2*arm + reward; Gaussian: [one_hot(arm), reward * one_hot(arm)]), "
                     "which lets a one-token-per-transition transformer pair each reward with its arm; none = a "
                     "constant 0")
    noise_std: float = option(0.5, "std of the Gaussian reward noise (--kind gaussian; also UCB1's reward scale "
                                   "there)")
    ucb_c: float = option(1.0, "exploration coefficient of UCB1 (1 = the textbook bonus sqrt(2 ln n / n_j))")
    noise_start: float = override(NoiseOptions, "noise_start", 1.0)
    noise_end: float = override(NoiseOptions, "noise_end", 0.0)
    noise_decay_fraction: float = override(NoiseOptions, "noise_decay_fraction", 1.0)
    noise_power: float = override(NoiseOptions, "noise_power", 1.0)
    max_return_fraction: float = override(NoiseOptions, "max_return_fraction", 1.0)
    histories: int = option(1, "random source: independent histories (streams) per instance, each with its own drawn "
                               "arm distribution: more contexts of the same instances and split")
    random_policy: Literal["dirichlet", "uniform"] = override(RandomOptions, "random_policy", "dirichlet")
    random_alpha: float = override(RandomOptions, "random_alpha", 1.0)
    random_mix: float = override(RandomOptions, "random_mix", 1.0)

    def __post_init__(self) -> None:
        check_arms(self.arms)
        refuse(self, ("instances",), lambda v: not 1 <= v <= MAX_INSTANCES, f"must be in 1..{MAX_INSTANCES}")
        refuse(self, ("pulls",), lambda v: v <= 0, "must be positive")
        check_memory(self.histories * memory_bytes(self.instances, self.arms, self.pulls), f"--pulls {self.pulls} on "
                     f"{min(BLOCK, self.instances)} instances at a time", "pass fewer --pulls")
        refuse(self, ("heldout_fraction",), lambda v: not 0.0 <= v < 1.0, "must be in [0, 1)")
        refuse(self, ("noise_std",), lambda v: not v > 0.0, "must be positive")
        refuse(self, ("ucb_c",), lambda v: not v >= 0.0, "must be >= 0 (0 = greedy after one pull of each arm)")
        check_noise_options(self)
        check_random_options(self)
        if self.histories < 1 or (self.histories > 1 and self.source != "random"):
            raise UserError(f"--histories must be 1, or above 1 with --source random only, got {self.histories} "
                            f"with --source {self.source}")
