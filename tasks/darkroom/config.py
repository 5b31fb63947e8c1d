"""Options of ``ad generate darkroom`` (importing this module does not import torch)."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Literal

from ad.config import option, override
from ad.distributed import check_backend_options
from ad.errors import UserError
from ad.memory import check_memory
from tasks.darkroom.goals import check_size, resolve_goals, start_cell
from tasks.noise import NoiseOptions, check_noise_options
from tasks.random_source import RandomOptions, check_random_options

N = NoiseOptions

#: Whether this machine has a second core for background shard encoding (the default of --background-writing).
_MULTICORE = (os.cpu_count() or 1) >= 2

#: The A2C hyperparameters of the DarkRoom AD recipe this toolkit reproduces (the default), and a faster-learning
#: variant for short budgets.
_STANDARD = {"hidden": 128, "num_envs": 10, "num_steps": 10, "lr": 1e-4, "adam_betas": [0.9, 0.999],
            "adam_eps": 1e-6, "max_grad_norm": 0.5, "ent_coef": 0.01, "vf_coef": 0.99, "gamma": 0.99,
            "gae_lambda": 1.0, "steps_per_goal": 400_000}


def batch_memory_bytes(size: int, hidden: int, num_envs: int, goals: int) -> int:
    """Rough peak memory of one batch of A2C agents: per goal, parameters + gradient + two Adam moments + the
    pre-ReLU gradient of the (hidden, cells) embedding and heads, and the (actions, cells) policy table."""
    cells, actions = size * size, 5
    per_goal = 5 * (hidden * cells + (actions + 1) * (hidden + 1)) + 3 * actions * cells + 64 * num_envs
    return 4 * goals * per_goal


def check_a2c_options(config: Any) -> None:
    """UserError for A2C hyperparameters out of range (shared by every generator built on :mod:`tasks.darkroom.a2c`:
    DarkRoom, Key-to-Door); non-finite values are refused too."""
    if not (0 < config.lr < math.inf and 0 < config.adam_eps < math.inf and 0 < config.max_grad_norm < math.inf):
        raise UserError("--lr, --adam-eps and --max-grad-norm must be positive and finite")
    if not (0 <= config.ent_coef < math.inf and 0 <= config.vf_coef < math.inf):
        raise UserError(f"--ent-coef and --vf-coef must be finite and >= 0, got {config.ent_coef} and {config.vf_coef}")
    if len(config.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in config.adam_betas):
        raise UserError(f"--adam-betas needs two values in [0, 1), got {config.adam_betas}")
    if not (0.0 <= config.gamma <= 1.0 and 0.0 <= config.gae_lambda <= 1.0):
        raise UserError("--gamma and --gae-lambda must be in [0, 1]")


@dataclass
class GenerateConfig:
    """Train one A2C agent per DarkRoom goal (all goals batched), or run the explorer or the noisy demonstrator on
    every goal, and record their learning histories."""

    PRESETS = {
        "standard": dict(_STANDARD),
        "fast": {**_STANDARD, "lr": 1e-3, "steps_per_goal": 100_000},
    }

    out: str = option("data/darkroom", "output dataset folder or URL (file://, s3://, gs://, memory:// ...; "
                                       "re-running the same command resumes)", runtime=True)
    preset: Literal["standard", "fast"] = option("standard", "A2C preset: standard (lr 1e-4, 400k steps/goal: the "
                                                        "recipe's values) or fast (lr 1e-3, 100k steps/goal)")
    size: int = option(9, "grid side; states are cells row*size+col")
    goals: list[str] = option(["all"], "goals to train: 'all' (every cell but the centre) or 'row,col' items")
    steps_per_goal: int = option(400_000, "env steps per goal (over its parallel envs); rounded up to whole updates")
    seed: int = option(0, "run seed: agent init, action sampling and the train/held-out split; recorded as run")
    heldout_fraction: float = option(0.25, "fraction of the goals held out from training the transformer")
    episode_length: int = option(20, "steps per episode (truncation)")
    random_start: bool = option(False, "start each episode in a random cell instead of the centre")
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
    hidden: int = option(128, "width of the shared embedding layer")
    num_envs: int = option(10, "parallel envs per goal (one history stream each)")
    num_steps: int = option(10, "rollout length per update")
    lr: float = option(1e-4, "Adam learning rate")
    adam_betas: list[float] = option([0.9, 0.999], "Adam betas")
    adam_eps: float = option(1e-6, "Adam epsilon")
    max_grad_norm: float = option(0.5, "gradient-norm clip, applied to each goal's agent separately")
    ent_coef: float = option(0.01, "entropy bonus coefficient")
    vf_coef: float = option(0.99, "value-loss coefficient")
    gamma: float = option(0.99, "discount")
    gae_lambda: float = option(1.0, "GAE lambda; 1.0 = plain n-step returns (the recipe's choice)")
    # running
    goals_per_batch: int = option(0, "goals trained together in one batch = one work unit (0 = all goals with "
                                     "--backend local, 8 per unit with --backend ray); batches commit one by one. "
                                     "A goal's history is the same whatever this value or the backend, bit for bit, "
                                     "on one CPU type and torch build", runtime=True)
    backend: str = option("local", "where batches run: local (this process) or ray (one Ray task per batch; "
                                   "pip install 'algorithm-distillation[ray]')", runtime=True)
    address: str = option("", "Ray cluster to join with --backend ray ('auto', 'host:6379', 'ray://host:10001'); "
                              "empty = start a local Ray instance. On several machines --out must be storage "
                              "they all reach (s3://, gs://, a shared file system)", runtime=True)
    workers: int = option(0, "most batches running at once with --backend ray (0 = one per CPU of the cluster; "
                             "also the CPU count of a local Ray instance)", runtime=True)
    run_dir: str = option("", "local folder for summary.json, learning curves, GIF and TensorBoard (default: "
                              "<out>/_run for a local --out, runs/generate-<name> for a remote URL)", runtime=True)
    logprob_bits: int = option(23, "mantissa bits kept in the stored logprobs: 23 = exact float32; 7 = bfloat16 "
                                   "precision (relative error <= 2^-8), smaller datasets")
    threads: int = option(1, "torch CPU threads for the elementwise work (0 = torch's default); the A2C's matrix "
                             "products always run on one thread, so results do not depend on it", runtime=True)
    background_writing: bool = option(_MULTICORE, "encode the history shards on a background thread (at lower "
                                                  "CPU priority) while training goes on, so a second core takes the "
                                                  "Parquet encoding. On by default with 2+ cores; Ray workers always "
                                                  "write on their training thread", runtime=True)
    tensorboard: bool = option(True, "write TensorBoard scalars (per goal) under <out>/_run/tb", runtime=True)
    log_every: int = option(500, "updates between TensorBoard / progress-bar statistics", runtime=True)
    plots: bool = option(True, "save learning curves (PNG) and greedy-policy GIFs next to the dataset", runtime=True)
    gif_goals: int = option(4, "goals shown in the greedy-policy GIF", runtime=True)
    progress: bool = option(True, "show a progress bar", runtime=True)

    def __post_init__(self) -> None:
        check_size(self.size)
        if self.preset not in self.PRESETS:
            raise UserError(f"unknown preset {self.preset!r}; choose one of: {', '.join(sorted(self.PRESETS))}")
        if self.steps_per_goal <= 0:
            raise UserError(f"--steps-per-goal must be positive, got {self.steps_per_goal}")
        for name in ("episode_length", "hidden", "num_envs", "num_steps", "log_every"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
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
        per_batch = min(self.goals_per_batch or len(goals), len(goals))
        check_memory(batch_memory_bytes(self.size, self.hidden, self.num_envs, per_batch),
                     f"--size {self.size} with {per_batch} goals per batch",
                     "pass a smaller --goals-per-batch, fewer --goals or a smaller --size")
        check_backend_options(self.backend, self.address, self.workers)

    @property
    def updates(self) -> int:
        """Optimiser steps per goal: ceil(steps_per_goal / (num_envs * num_steps))."""
        per_update = self.num_envs * self.num_steps
        return -(-self.steps_per_goal // per_update)
