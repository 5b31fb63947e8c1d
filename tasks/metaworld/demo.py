"""``ad demo --task metaworld``: Algorithm Distillation on Meta-World ML1 end to end (:mod:`ad.demo`).

The source's histories (the noisy scripted expert, or the goal-blind search of :mod:`tasks.metaworld.search`) on
``--train-goals`` of ML1's 50 training goals (and the held-out goals, for the source's own curve) -> AD (the
RL-format transformer with the continuous action head, a context of a few shortened episodes) and ED -> in context
on ``--heldout-goals`` of ML1's 50 test goals; ``ad eval`` reports the success rate per episode beside the return.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ad.config import option, override
from ad.demo import ADDemoConfig
from ad.errors import UserError


@dataclass
class MetaWorldDemoConfig(ADDemoConfig):
    """Algorithm Distillation on Meta-World ML1 (generate -> train AD and ED -> evaluate -> report)."""

    FAMILY: ClassVar[str] = "metaworld"
    TITLE: ClassVar[str] = "Meta-World ML1"
    REPORT_WINDOWS: ClassVar[tuple[tuple[int, int], ...]] = ((6, 10),)

    out: str = override(ADDemoConfig, "out", "data/demo-metaworld")
    skill: str = option("reach-v3", "Meta-World ML1 skill (reach-v3, push-v3, pick-place-v3 ...)")
    train_goals: str = option("0-14", "ML1 training goals whose histories AD and ED learn from (e.g. 0-49)")
    heldout_goals: str = option("0-49", "ML1 test goals of the in-context evaluation (e.g. 0-49, 0-9)")
    ml1_seed: int = option(0, "seed of Meta-World's ML1 goal positions (`ad generate metaworld --ml1-seed`): another "
                              "seed draws another 50 training and 50 held-out goals")
    source: Literal["noise", "search"] = option("noise", "source of the histories (`ad generate metaworld "
                                                         "--source`): noise = the scripted expert with falling "
                                                         "noise; search = a goal-blind run-and-tumble search (reach "
                                                         "skills; use --subsample 1: it remembers its best position)")
    search_memory: Literal["first", "mean"] = option("first", "the search source's best position (`ad generate "
                                                              "metaworld --search-memory`): first = the first "
                                                              "best-rewarded, mean = the mean of all best-rewarded")
    history_runs: int = option(1, "histories per goal (`ad generate metaworld --runs`)")
    history_episodes: int = option(40, "episodes per recorded history (the source's noise falls once per episode)")
    episode_length: int = option(80, "steps per episode (the reach expert needs at most 78, median 48; "
                                     "Meta-World's own: 500)")
    noise_max: float = option(4.0, "std of the noise source's action noise in a history's first episode")
    noise_min: float = option(0.1, "std of the source's action noise in a history's last episode (search: in "
                                   "every episode)")
    batch_size: int = option(16, "windows per optimiser step of AD and ED")
    subsample: int = override(ADDemoConfig, "subsample", 4)
    context: int = override(ADDemoConfig, "context", 320)
    ad_steps: int = override(ADDemoConfig, "ad_steps", 1000)
    ed_steps: int = override(ADDemoConfig, "ed_steps", 500)
    episodes: int = override(ADDemoConfig, "episodes", 10)
    seeds: int = override(ADDemoConfig, "seeds", 1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if min(self.history_episodes, self.episode_length, self.batch_size, self.history_runs) <= 0:
            raise UserError(f"--history-episodes, --episode-length, --batch-size and --history-runs must be "
                            f"positive, got {self.history_episodes}, {self.episode_length}, {self.batch_size} and "
                            f"{self.history_runs}")
        if not self.heldout_goals.strip():
            raise UserError("--heldout-goals names no goal; the demo evaluates on held-out goals (e.g. 0-49)")

    def generate_options(self) -> dict[str, Any]:
        """Options of ``ad generate metaworld``."""
        return {"skill": self.skill, "source": self.source, "search_memory": self.search_memory,
                "runs": self.history_runs,
                "train_goals": self.train_goals,
                "heldout_goals": self.heldout_goals, "episodes": self.history_episodes,
                "episode_length": self.episode_length, "noise_max": self.noise_max, "noise_min": self.noise_min,
                "ml1_seed": self.ml1_seed, "seed": self.seed}

    def train_options(self) -> dict[str, Any]:
        """The pipeline's ``ad train rl`` options plus the batch size; rewards (0-10 a step) are continuous inputs
        and the outcome heads are off (the action head alone is trained)."""
        return {**super().train_options(), "batch_size": self.batch_size, "reward_kind": "continuous",
                "state_weight": 0.0, "reward_weight": 0.0}
