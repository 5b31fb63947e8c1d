"""Options of ``ad generate keydoor`` (importing this module does not import torch).

The room, A2C and running options are the grid engine's (:class:`tasks.grid.family.GridOptions`: same help, declared
there once, taken through :func:`ad.config.override`); the defaults are the ones measured on Key-to-Door.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, override
from ad.errors import UserError
from tasks.grid.family import GridOptions, check_a2c_options, check_batches
from tasks.grid.room import check_size
from tasks.keydoor.pairs import draw_pairs, steps_needed, task_name
from tasks.source_options import NoiseOptions, RandomOptions, check_noise_options, check_random_options

D = GridOptions


@dataclass
class GenerateConfig:
    """Train one A2C agent per Key-to-Door task (key/door pair; all tasks batched), or run the noisy demonstrator on
    every task, and record their histories."""

    out: str = override(D, "out", "data/keydoor")
    size: int = override(D, "size", 9)
    tasks: int = option(400, "key/door pairs to train, drawn without replacement (seeded by --seed) from the "
                             "size^2 * (size^2 - 1) ordered pairs of distinct cells (6480 on 9x9); 0 = all")
    pairs: list[str] = option([], "train these pairs instead of drawing --tasks: 'key_row,key_col/door_row,door_col' "
                                  "items or task names (keydoor9-k1-2-d7-7)")
    steps_per_task: int = option(400_000, "env steps per task (over its parallel envs); rounded up to whole updates")
    seed: int = option(0, "run seed: the drawn pairs, agent init, action sampling and the train/held-out split; "
                          "recorded as run")
    heldout_fraction: float = option(0.1, "fraction of the tasks held out from training the transformer")
    episode_length: int = override(D, "episode_length", 50)
    random_start: bool = override(D, "random_start", False)
    source: Literal["a2c", "noise", "random"] = option(
        "a2c", "source algorithm: a2c (one A2C agent per task; the options below), noise (noise distillation: a "
               "demonstrator walking a shortest path to the key, then the door, made epsilon-greedy, epsilon falling "
               "over each history; the --noise-* options) or random (each stream acts from its own drawn action "
               "distribution, the DPT paper's contexts; the --random-* options); noise and random write --num-envs "
               "streams of steps-per-task / (num-envs * episode-length) episodes")
    noise_start: float = override(NoiseOptions, "noise_start", 1.0)
    noise_end: float = override(NoiseOptions, "noise_end", 0.0)
    noise_decay_fraction: float = override(NoiseOptions, "noise_decay_fraction", 1.0)
    noise_power: float = override(NoiseOptions, "noise_power", 1.0)
    max_return_fraction: float = override(NoiseOptions, "max_return_fraction", 1.0)
    random_policy: Literal["dirichlet", "uniform"] = override(RandomOptions, "random_policy", "uniform")
    random_alpha: float = override(RandomOptions, "random_alpha", 1.0)
    random_mix: float = override(RandomOptions, "random_mix", 1.0)
    # A2C
    hidden: int = override(D, "hidden", 128)
    num_envs: int = override(D, "num_envs", 10)
    num_steps: int = override(D, "num_steps", 10)
    lr: float = override(D, "lr", 1e-3)
    adam_betas: list[float] = override(D, "adam_betas", [0.9, 0.999])
    adam_eps: float = override(D, "adam_eps", 1e-6)
    max_grad_norm: float = override(D, "max_grad_norm", 0.5)
    ent_coef: float = override(D, "ent_coef", 0.01)
    vf_coef: float = override(D, "vf_coef", 0.99)
    gamma: float = override(D, "gamma", 0.99)
    gae_lambda: float = override(D, "gae_lambda", 1.0)
    # running
    goals_per_batch: int = option(0, "tasks trained together in one batch = one work unit (0 = all tasks with "
                                     "--backend local, 8 per unit with --backend ray); a task's history does not "
                                     "depend on it", runtime=True)
    backend: str = override(D, "backend", "local")
    address: str = override(D, "address", "")
    workers: int = override(D, "workers", 0)
    run_dir: str = override(D, "run_dir", "")
    logprob_bits: int = override(D, "logprob_bits", 23)
    threads: int = override(D, "threads", 1)
    background_writing: bool = override(D, "background_writing", D.background_writing)
    tensorboard: bool = option(False, "write TensorBoard scalars (per task) under <out>/_run/tb", runtime=True)
    log_every: int = override(D, "log_every", 500)
    plots: bool = option(True, "save the A2C learning curves (PNG) next to the dataset", runtime=True)
    progress: bool = override(D, "progress", True)

    #: The grid engine reads these fields; Key-to-Door has no presets and always ends at the door.
    preset = "keydoor"
    terminate_on_goal = True

    def __post_init__(self) -> None:
        check_size(self.size, "Key-to-Door")
        if self.steps_per_task <= 0:
            raise UserError(f"--steps-per-task must be positive, got {self.steps_per_task}")
        if self.tasks < 0 or self.goals_per_batch < 0 or self.threads < 0:
            raise UserError("--tasks, --goals-per-batch and --threads must be >= 0")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise UserError(f"--heldout-fraction must be in [0, 1) (at least one task must train), got "
                            f"{self.heldout_fraction}")
        check_a2c_options(self)
        check_noise_options(self)
        check_random_options(self)
        if isinstance(self.pairs, str):
            self.pairs = [self.pairs]
        exist = self.size ** 2 * (self.size ** 2 - 1)
        if self.tasks > exist and not self.pairs:
            raise UserError(f"--tasks {self.tasks}: a {self.size}x{self.size} room has only {exist} key/door pairs; "
                            f"pass --tasks {exist} or less (0 = all of them) or a larger --size")
        pairs = self.task_pairs()  # raises UserError for a bad pair
        need = {p: steps_needed(self.size, p, self.random_start) for p in pairs}
        longest = max(need, key=need.get)
        if self.episode_length < need[longest]:
            start = "the farthest start cell (--random-start)" if self.random_start else "the start cell"
            raise UserError(f"--episode-length {self.episode_length} is too short: task "
                            f"{task_name(self.size, longest)} needs {need[longest]} steps from {start} to its key and then its door, so no episode "
                            f"could finish it; pass --episode-length {need[longest]} or more")
        check_batches(self, len(pairs), 2, "tasks", "--tasks")  # (cell, key carried) tables

    def task_pairs(self) -> list[tuple[int, int, int, int]]:
        """The (key row, key col, door row, door col) of every task of this run, in order."""
        return draw_pairs(self.size, self.tasks, self.seed, self.pairs)

    @property
    def updates(self) -> int:
        """Optimiser steps per task: ceil(steps_per_task / (num_envs * num_steps))."""
        return -(-self.steps_per_task // (self.num_envs * self.num_steps))
