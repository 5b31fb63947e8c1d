"""The options every grid family's A2C source shares, declared once, and their checks (no torch import).

A family's config takes each option with :func:`ad.config.override` and its own default
(``lr: float = override(GridOptions, "lr", 1e-3)``), so help texts are written here only.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from ad.config import option
from ad.distributed import check_backend_options
from ad.errors import UserError
from ad.memory import check_memory

#: Whether this machine has a second core for background shard encoding (the default of --background-writing).
MULTICORE = (os.cpu_count() or 1) >= 2


@dataclass
class GridOptions:
    """The room, the A2C and the running options of a grid family's source (declarations; defaults are
    DarkRoom's)."""

    out: str = option("data/darkroom", "output dataset folder or URL (file://, s3://, gs://, memory:// ...; "
                                       "re-running the same command resumes)", runtime=True)
    size: int = option(9, "grid side; states are cells row*size+col")
    episode_length: int = option(20, "steps per episode (truncation)")
    random_start: bool = option(False, "start each episode in a random cell instead of the centre")
    # A2C
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
    background_writing: bool = option(MULTICORE, "encode the history shards on a background thread (at lower "
                                                 "CPU priority) while training goes on, so a second core takes the "
                                                 "Parquet encoding. On by default with 2+ cores; Ray workers always "
                                                 "write on their training thread", runtime=True)
    log_every: int = option(500, "updates between TensorBoard / progress-bar statistics", runtime=True)
    progress: bool = option(True, "show a progress bar", runtime=True)


def batch_memory_bytes(size: int, hidden: int, num_envs: int, goals: int) -> int:
    """Rough peak memory of one batch of A2C agents: per goal, parameters + gradient + two Adam moments + the
    pre-ReLU gradient of the (hidden, cells) embedding and heads, and the (actions, cells) policy table."""
    cells, actions = size * size, 5
    per_goal = 5 * (hidden * cells + (actions + 1) * (hidden + 1)) + 3 * actions * cells + 64 * num_envs
    return 4 * goals * per_goal


def check_batches(config: Any, tasks: int, tables: int, noun: str, fewer: str) -> None:
    """UserError where one batch of ``tasks`` agents (``tables`` tables of the room's cells each) would not fit in
    memory, or the backend options are off; ``noun`` names the tasks and ``fewer`` the option that has fewer."""
    per_batch = min(config.goals_per_batch or tasks, tasks)
    check_memory(tables * batch_memory_bytes(config.size, config.hidden, config.num_envs, per_batch),
                 f"--size {config.size} with {per_batch} {noun} per batch",
                 f"pass a smaller --goals-per-batch, fewer {fewer} or a smaller --size")
    check_backend_options(config.backend, config.address, config.workers)


def check_a2c_options(config: Any) -> None:
    """UserError for A2C and running options out of range (shared by every family built on :mod:`tasks.grid.a2c`:
    DarkRoom, Key-to-Door); non-finite values are refused too."""
    for name in ("episode_length", "hidden", "num_envs", "num_steps", "log_every"):
        if getattr(config, name) <= 0:
            raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(config, name)}")
    if not (0 < config.lr < math.inf and 0 < config.adam_eps < math.inf and 0 < config.max_grad_norm < math.inf):
        raise UserError("--lr, --adam-eps and --max-grad-norm must be positive and finite")
    if not (0 <= config.ent_coef < math.inf and 0 <= config.vf_coef < math.inf):
        raise UserError(f"--ent-coef and --vf-coef must be finite and >= 0, got {config.ent_coef} and {config.vf_coef}")
    if len(config.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in config.adam_betas):
        raise UserError(f"--adam-betas needs two values in [0, 1), got {config.adam_betas}")
    if not (0.0 <= config.gamma <= 1.0 and 0.0 <= config.gae_lambda <= 1.0):
        raise UserError("--gamma and --gae-lambda must be in [0, 1]")
