"""``ad demo --task lunarlander``: Algorithm Distillation on LunarLander end to end.

Learning histories on every gravity / wind task (the batched PPO, or ``--source noise``: the noisy heuristic lander) ->
AD on subsampled histories of the training tasks and the ED baseline (and DPT, with ``--methods``) -> all in context
on the held-out tasks, beside the source's own first episodes -> report.md (the pipeline: :mod:`ad.demo`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ad.config import option, override, refuse_choice
from ad.demo import ADDemoConfig
from ad.errors import UserError
from tasks.lunarlander.instances import check_number


@dataclass
class LunarLanderDemoConfig(ADDemoConfig):
    """Algorithm Distillation on LunarLander end to end (generate -> train AD and ED -> evaluate -> report)."""

    FAMILY = "lunarlander"
    TITLE = "LunarLander"
    REPORT_WINDOWS = ((6, 10),)

    out: str = override(ADDemoConfig, "out", "data/demo-lunarlander")
    subsample: int = option(4, "AD trains on every k-th episode of each history (the AD paper's subsampling)")
    context: int = option(256, "transformer context in transitions (a LunarLander episode is 100-1000 steps)")
    ad_steps: int = option(600, "optimiser steps for AD")
    ed_steps: int = option(300, "optimiser steps for the expert-distillation baseline")
    episodes: int = option(10, "episodes in context at evaluation")
    seeds: int = option(1, "evaluation seeds per held-out task")
    tasks: int = option(16, "LunarLander tasks (gravity / wind settings); a quarter is held out")
    steps: int = option(64_000, "env steps of the batched PPO source on each task")
    streams: int = option(4, "source histories (parallel envs) per task")
    swap_fraction: float = option(0.0, "probability that a task's three engines are swapped (which action fires "
                                       "which engine must be found out in context)")
    source: Literal["ppo", "noise"] = option("ppo", "source of the histories (`ad generate lunarlander --source`): "
                                                     "ppo = the batched PPO learner (--steps a task), noise = "
                                                     "Gymnasium's heuristic lander made epsilon-greedy, epsilon "
                                                     "falling over --history-episodes episodes")
    history_episodes: int = option(40, "noise source: episodes per recorded history (epsilon falls once per episode)")

    def __post_init__(self) -> None:
        super().__post_init__()
        refuse_choice(self, source=("ppo", "noise"))
        for name in ("tasks", "steps", "streams", "history_episodes"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.tasks < 2:
            raise UserError(f"--tasks must be at least 2 (one is held out for the evaluation), got {self.tasks}")
        check_number(self.swap_fraction, 0.0, 1.0, "--swap-fraction")

    def train_options(self) -> dict[str, Any]:
        """The shared ``ad train rl`` options, with rewards as floats (LunarLander's are shaped, -100..100) and no
        reward-regression loss (an MSE on crash penalties of -100 would drown the action loss)."""
        return {**super().train_options(), "reward_kind": "continuous", "reward_weight": 0.0}

    def generate_options(self) -> dict[str, Any]:
        """Options of ``ad generate lunarlander`` for this demo."""
        options = {"tasks": self.tasks, "steps": self.steps, "streams": self.streams, "seed": self.seed,
                   "heldout_fraction": 0.25, "swap_fraction": self.swap_fraction}
        if self.source == "noise":
            options.update(source="noise", episodes=self.history_episodes)
        return options
