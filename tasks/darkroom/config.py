"""Options of ``ad generate darkroom`` (importing this module does not import torch)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, refuse
from ad.errors import UserError
from tasks.darkroom.goals import resolve_goals
from tasks.grid.family import GridOptions, check_batches
from tasks.grid.room import check_size, start_cell

#: The A2C hyperparameters of the DarkRoom AD recipe this toolkit reproduces (the default), and a faster-learning
#: variant for short budgets.
_STANDARD = {"hidden": 128, "num_envs": 10, "num_steps": 10, "learning_rate": 1e-4, "adam_betas": [0.9, 0.999],
             "adam_eps": 1e-6, "max_grad_norm": 0.5, "ent_coef": 0.01, "vf_coef": 0.99, "gamma": 0.99,
             "gae_lambda": 1.0, "steps_per_goal": 400_000}


@dataclass
class GenerateConfig(GridOptions):
    """Train one A2C agent per DarkRoom goal (all goals batched), or run the explorer or the noisy demonstrator on
    every goal, and record their learning histories."""

    PRESETS = {
        "standard": dict(_STANDARD),
        "fast": {**_STANDARD, "learning_rate": 1e-3, "steps_per_goal": 100_000},
    }

    preset: Literal["standard", "fast"] = option("standard", "A2C preset: standard (the recipe's learning rate and "
                                                             "400k steps per goal) or fast (ten times the learning "
                                                             "rate, 100k steps per goal)")
    goals: list[str] = option(["all"], "goals to train: 'all' (every cell but the centre) or 'row,col' items")
    steps_per_goal: int = option(400_000, "env steps per goal (over its parallel envs); rounded up to whole updates")
    terminate_on_goal: bool = option(True, "end the episode when the goal is reached (the AD paper's choice)")
    source: Literal["a2c", "explorer", "noise", "random"] = option(
        "a2c", "source algorithm: a2c (one A2C agent per goal, the AD paper's source), explorer (walks to the "
               "nearest cell it never visited until it finds the goal, then to the goal), noise (noise distillation: "
               "a shortest-path demonstrator made epsilon-greedy, epsilon falling over each history) or random (each "
               "stream acts from its own drawn action distribution, the DPT paper's contexts). Explorer, noise and "
               "random write --num-envs streams of steps-per-goal / (num-envs * episode-length) episodes")
    gif_goals: int = option(4, "goals shown in the greedy-policy GIF", runtime=True)

    def __post_init__(self) -> None:
        check_size(self.size)
        if self.preset not in self.PRESETS:
            raise UserError(f"unknown preset {self.preset!r}; choose one of: {', '.join(sorted(self.PRESETS))}")
        refuse(self, ("steps_per_goal",), lambda v: v <= 0, "must be positive")
        refuse(self, ("gif_goals",), lambda v: v < 0, "must be >= 0")
        super().__post_init__()
        if isinstance(self.goals, str):
            self.goals = [self.goals]
        goals = resolve_goals(self.goals, self.size)  # raises UserError for a goal off the grid
        if not self.random_start and start_cell(self.size) in goals:
            r, c = start_cell(self.size)
            raise UserError(f"--goals {r},{c} is the start cell of a {self.size}x{self.size} room (episodes start "
                            "there): choose another goal, or pass --random-start")
        check_batches(self, len(goals), 1, "goals", "--goals")

    @property
    def updates(self) -> int:
        """Optimiser steps per goal: ceil(steps_per_goal / (num_envs * num_steps))."""
        per_update = self.num_envs * self.num_steps
        return -(-self.steps_per_goal // per_update)
