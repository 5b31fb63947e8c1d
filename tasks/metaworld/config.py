"""Options of ``ad generate metaworld`` (importing this module imports neither Meta-World nor torch)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option
from ad.errors import UserError
from ad.config.groups import dataset_out, run_options
from tasks.metaworld.skills import MAX_EPISODE_STEPS, check_skill, parse_goals
from tasks.metaworld.vector_env import DEFAULT_EPISODE_LENGTH

#: Sources ``--source`` takes.
SOURCES = ("noise", "search")


@dataclass
class GenerateConfig(run_options("out", "seed", "progress")):
    """Record learning histories on Meta-World ML1 goals of one skill: Meta-World's scripted expert with Gaussian
    action noise that falls over each history (noise distillation), or a search that finds the goal from the reward
    alone (reach skills)."""

    out: str = dataset_out("data/metaworld")
    skill: str = option("reach-v3", "Meta-World ML1 skill (a V3 env name: reach-v3, push-v3, pick-place-v3 ...)")
    source: Literal["noise", "search"] = option("noise", "source of the histories: noise = the skill's scripted "
                                                         "expert (metaworld.policies) with Gaussian action noise "
                                                         "falling from --noise-max to --noise-min over each history; "
                                                         "search = a run-and-tumble search from the best-rewarded "
                                                         "hand position so far, never reading the goal (reach skills)")
    search_memory: Literal["first", "mean"] = option("first", "search source: which best-rewarded hand position it "
                                                              "returns to each episode: first = the first that "
                                                              "earned the highest reward so far; mean = the mean of "
                                                              "all that earned it (inside the ball where the reach "
                                                              "reward saturates, rather than at its edge)")
    train_goals: str = option("0-49", "indices of ML1's 50 training goals to record (e.g. 0-49, 0-9, 0,3,7); the "
                                      "transformers train on these")
    heldout_goals: str = option("0-49", "indices of ML1's 50 test goals to record (the held-out tasks; empty: "
                                        "none); the transformers are evaluated on these")
    runs: int = option(1, "histories (seeds) per goal; each goal x run is one unit of the dataset")
    episodes: int = option(40, "episodes per history: the noise falls once per episode")
    episode_length: int = option(DEFAULT_EPISODE_LENGTH, f"steps per episode (Meta-World's own: "
                                                         f"{MAX_EPISODE_STEPS}); every episode ends truncated")
    noise_max: float = option(4.0, "noise source: std of the action noise in a history's first episode (actions "
                                   "lie in [-1, 1])")
    noise_min: float = option(0.1, "std of the action noise in a history's last episode (the search source: in "
                                   "every episode); > 0, so every action keeps a finite log-density")
    ml1_seed: int = option(0, "seed of Meta-World's ML1 goal positions (metaworld.ML1(skill, seed)): the same "
                              "seed gives the same 50 + 50 goals")
    batch: int = option(25, "goals stepped together in one vectorised env (memory: one MuJoCo model each)",
                        runtime=True)
    workers: int = option(1, "processes stepping blocks of goals at once (1: this process only); the histories "
                             "are the same for any number", runtime=True)

    def __post_init__(self) -> None:
        for name in ("runs", "episodes", "batch", "workers"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name} must be positive, got {getattr(self, name)}")
        if not 1 <= self.episode_length <= MAX_EPISODE_STEPS:
            raise UserError(f"--episode-length must be in 1..{MAX_EPISODE_STEPS}, got {self.episode_length}")
        if not self.noise_max > 0.0:
            raise UserError(f"--noise-max must be positive, got {self.noise_max}")
        if not 0.0 < self.noise_min <= self.noise_max:
            raise UserError(f"--noise-min must be positive and at most --noise-max ({self.noise_max}), "
                            f"got {self.noise_min}")
        if not 0 <= self.ml1_seed < 2**32:
            raise UserError(f"--ml1-seed must be in 0..{2**32 - 1} (a seed of metaworld.ML1), got {self.ml1_seed}")
        check_skill(self.skill, need_expert=True)  # the expert gives every task's optimal_return
        if self.source == "search":
            from tasks.metaworld.search import check_search_skill

            check_search_skill(self.skill)
        if not parse_goals(self.train_goals, "train", "--train-goals"):
            raise UserError("--train-goals names no goal; give at least one (e.g. 0-49)")
        parse_goals(self.heldout_goals, "test", "--heldout-goals")
