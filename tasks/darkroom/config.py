"""Options of ``ad generate darkroom`` (importing this module does not import torch)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, override
from ad.errors import UserError
from tasks.darkroom.goals import resolve_goals
from tasks.grid.family import GridOptions, check_a2c_options, check_batches
from tasks.grid.room import check_size, start_cell
from tasks.source_options import NoiseOptions, RandomOptions, check_noise_options, check_random_options

N = NoiseOptions
G = GridOptions

#: The A2C hyperparameters of the DarkRoom AD recipe this toolkit reproduces (the default), and a faster-learning
#: variant for short budgets.
_STANDARD = {"hidden": 128, "num_envs": 10, "num_steps": 10, "lr": 1e-4, "adam_betas": [0.9, 0.999],
            "adam_eps": 1e-6, "max_grad_norm": 0.5, "ent_coef": 0.01, "vf_coef": 0.99, "gamma": 0.99,
            "gae_lambda": 1.0, "steps_per_goal": 400_000}


@dataclass
class GenerateConfig:
    """Train one A2C agent per DarkRoom goal (all goals batched), or run the explorer or the noisy demonstrator on
    every goal, and record their learning histories."""

    PRESETS = {
        "standard": dict(_STANDARD),
        "fast": {**_STANDARD, "lr": 1e-3, "steps_per_goal": 100_000},
    }

    out: str = override(G, "out", "data/darkroom")
    preset: Literal["standard", "fast"] = option("standard", "A2C preset: standard (lr 1e-4, 400k steps/goal: the "
                                                        "recipe's values) or fast (lr 1e-3, 100k steps/goal)")
    size: int = override(G, "size", 9)
    goals: list[str] = option(["all"], "goals to train: 'all' (every cell but the centre) or 'row,col' items")
    steps_per_goal: int = option(400_000, "env steps per goal (over its parallel envs); rounded up to whole updates")
    seed: int = option(0, "run seed: agent init, action sampling and the train/held-out split; recorded as run")
    heldout_fraction: float = option(0.25, "fraction of the goals held out from training the transformer")
    episode_length: int = override(G, "episode_length", 20)
    random_start: bool = override(G, "random_start", False)
    terminate_on_goal: bool = option(True, "end the episode when the goal is reached (the AD paper's choice)")
    source: Literal["a2c", "explorer", "noise", "random"] = option(
        "a2c", "source algorithm: a2c (one A2C agent per goal, the AD paper's source; the options below), explorer "
               "(the nearest-unvisited explorer: walks to the nearest cell it never visited until it finds the goal, "
               "then to the goal), noise (noise distillation: a shortest-path demonstrator made epsilon-greedy, "
               "epsilon falling over each history; the --noise-* options) or random (each stream acts from its own "
               "drawn action distribution, the DPT paper's contexts; the --random-* options); explorer, noise and "
               "random write --num-envs "
               "streams of steps-per-goal / (num-envs * episode-length) episodes")
    epsilon: float = option(0.1, "explorer: probability of a uniformly random action before the goal is found")
    epsilon_after_goal: float = option(0.02, "explorer: the same after the goal is found")
    noise_start: float = override(N, "noise_start", 1.0)
    noise_end: float = override(N, "noise_end", 0.0)
    noise_decay_fraction: float = override(N, "noise_decay_fraction", 1.0)
    noise_power: float = override(N, "noise_power", 1.0)
    max_return_fraction: float = override(N, "max_return_fraction", 1.0)
    random_policy: Literal["dirichlet", "uniform"] = override(RandomOptions, "random_policy", "uniform")
    random_alpha: float = override(RandomOptions, "random_alpha", 1.0)
    random_mix: float = override(RandomOptions, "random_mix", 1.0)
    # A2C (defaults = the standard preset)
    hidden: int = override(G, "hidden", 128)
    num_envs: int = override(G, "num_envs", 10)
    num_steps: int = override(G, "num_steps", 10)
    lr: float = override(G, "lr", 1e-4)
    adam_betas: list[float] = override(G, "adam_betas", [0.9, 0.999])
    adam_eps: float = override(G, "adam_eps", 1e-6)
    max_grad_norm: float = override(G, "max_grad_norm", 0.5)
    ent_coef: float = override(G, "ent_coef", 0.01)
    vf_coef: float = override(G, "vf_coef", 0.99)
    gamma: float = override(G, "gamma", 0.99)
    gae_lambda: float = override(G, "gae_lambda", 1.0)
    # running
    goals_per_batch: int = option(0, "goals trained together in one batch = one work unit (0 = all goals with "
                                     "--backend local, 8 per unit with --backend ray); batches commit one by one. "
                                     "A goal's history is the same whatever this value or the backend, bit for bit, "
                                     "on one CPU type and torch build", runtime=True)
    backend: str = override(G, "backend", "local")
    address: str = override(G, "address", "")
    workers: int = override(G, "workers", 0)
    run_dir: str = override(G, "run_dir", "")
    logprob_bits: int = override(G, "logprob_bits", 23)
    threads: int = override(G, "threads", 1)
    background_writing: bool = override(G, "background_writing", G.background_writing)
    tensorboard: bool = option(True, "write TensorBoard scalars (per goal) under <out>/_run/tb", runtime=True)
    log_every: int = override(G, "log_every", 500)
    plots: bool = option(True, "save learning curves (PNG) and greedy-policy GIFs next to the dataset", runtime=True)
    gif_goals: int = option(4, "goals shown in the greedy-policy GIF", runtime=True)
    progress: bool = override(G, "progress", True)

    def __post_init__(self) -> None:
        check_size(self.size)
        if self.preset not in self.PRESETS:
            raise UserError(f"unknown preset {self.preset!r}; choose one of: {', '.join(sorted(self.PRESETS))}")
        if self.steps_per_goal <= 0:
            raise UserError(f"--steps-per-goal must be positive, got {self.steps_per_goal}")
        if self.goals_per_batch < 0 or self.threads < 0 or self.gif_goals < 0:
            raise UserError("--goals-per-batch, --threads and --gif-goals must be >= 0")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise UserError(f"--heldout-fraction must be in [0, 1), got {self.heldout_fraction}")
        check_a2c_options(self)
        if not (0.0 <= self.epsilon <= 1.0 and 0.0 <= self.epsilon_after_goal <= 1.0):  # also refuses NaN
            raise UserError(f"--epsilon and --epsilon-after-goal must be in [0, 1], got {self.epsilon} and "
                            f"{self.epsilon_after_goal}")
        check_noise_options(self)
        check_random_options(self)
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
