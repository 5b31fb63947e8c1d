"""Options of ``ad generate gym`` (importing this module does not import torch or Stable-Baselines3)."""
from __future__ import annotations

from dataclasses import dataclass

from ad.config import option
from ad.errors import UserError
from ad.config.groups import dataset_out, run_options
from tasks.gym.task_file import check_finite

#: Algorithms ``--algo`` takes (``sb3:<Name>``): the ones the recorder's callback supports.
ALGORITHMS = ("PPO", "A2C", "SAC", "DQN")


@dataclass
class GymGenerateConfig(run_options("out", "seed", "progress")):
    """Train a Stable-Baselines3 algorithm on every task of a distribution over one Gymnasium env and record each
    run's whole learning history."""

    env: str = option("CartPole-v1", "Gymnasium id of the env (any registered id, e.g. LunarLander-v3)")
    tasks: str = option("", "YAML / JSON tasks file: a list of env kwargs per task, or a seeded sampler over ranges "
                            "(empty: one task with the env's defaults)")
    algo: str = option("sb3:PPO", "source algorithm: sb3:<Name> with Name one of PPO, A2C, SAC, DQN")
    algo_kwargs: dict = option({}, "keyword arguments of the algorithm's constructor as JSON, e.g. "
                                   "'{\"n_steps\": 256, \"learning_rate\": 0.001}'")
    steps: int = option(20_000, "env steps of the source algorithm on each task and run")
    runs: int = option(1, "source-algorithm runs (seeds) on each task; each run is one unit of the dataset")
    out: str = dataset_out("data/gym")
    heldout_fraction: float = option(0.2, "fraction of the tasks held out from training the transformer")

    def __post_init__(self) -> None:
        name = self.algo.partition("sb3:")[2]
        if not self.algo.startswith("sb3:") or name not in ALGORITHMS:
            raise UserError(f"--algo {self.algo!r} is not supported; use one of "
                            f"{', '.join('sb3:' + a for a in ALGORITHMS)}")
        if not isinstance(self.algo_kwargs, dict):
            raise UserError(f"--algo-kwargs must be a JSON object of keyword arguments, got {self.algo_kwargs!r}")
        check_finite(self.algo_kwargs, "--algo-kwargs")
        if self.steps <= 0:
            raise UserError(f"--steps must be positive, got {self.steps}")
        if not 1 <= self.runs <= 1000:
            raise UserError(f"--runs must be in 1..1000, got {self.runs}")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise UserError(f"--heldout-fraction must be in [0, 1), got {self.heldout_fraction}")
