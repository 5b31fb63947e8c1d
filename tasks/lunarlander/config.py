"""Options of ``ad generate lunarlander`` (importing this module does not import torch or Box2D)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, refuse_choice
from ad.errors import UserError
from ad.config.groups import dataset_out, run_options
from tasks.lunarlander.instances import GRAVITY, TURBULENCE_POWER, WIND_POWER, check_number
from tasks.source_options import NoiseOptions, check_noise_options

#: Options of the noise source only (left out of the PPO source's dataset metadata, which stays what it was).
NOISE_ONLY = ("source", "episodes")
#: Options of the PPO source only (left out of the noise source's dataset metadata).
PPO_ONLY = ("steps", "rollout", "epochs", "minibatches", "learning_rate", "gamma", "gae_lambda", "clip", "ent_coef",
            "vf_coef", "max_grad_norm", "hidden")

#: Most tasks one generation may hold (all run in one batched learner, one process).
MAX_TASKS = 1024


@dataclass
class GenerateConfig(run_options("out", "seed", "progress"), NoiseOptions):
    """A batched PPO learns every LunarLander task at once (one learner per task, one forward/backward for all),
    or Gymnasium's heuristic lander made epsilon-greedy plays every task (noise distillation), and every transition
    is recorded."""

    out: str = dataset_out("data/lunarlander")
    tasks: int = option(16, "tasks (lunarlander-t0000 ...): each one setting of gravity and wind, one unit")
    steps: int = option(64_000, "env steps of each task's learner, over all its streams")
    streams: int = option(4, "parallel envs (learning histories) per task; each task's PPO learns from all of them")
    gravity_low: float = option(-11.0, "lowest gravity drawn (Gymnasium accepts (-12, 0))")
    gravity_high: float = option(-5.0, "highest gravity drawn")
    wind_fraction: float = option(0.5, "probability that a task has wind (enable_wind)")
    wind_power_max: float = option(15.0, "wind_power ~ U(0, this) on windy tasks (Gymnasium accepts 0..20)")
    turbulence_power_max: float = option(1.5, "turbulence_power ~ U(0, this) on windy tasks (Gymnasium accepts 0..2)")
    swap_fraction: float = option(0.0, "probability that a task's three engines are swapped (a random action_map: "
                                        "which action fires which engine must be found out in context)")
    rollout: int = option(256, "env steps per stream between PPO updates")
    epochs: int = option(4, "PPO epochs over each rollout")
    minibatches: int = option(4, "minibatches per epoch (each one optimiser step of every task's learner)")
    learning_rate: float = option(5e-4, "Adam learning rate", aliases=("lr",))
    gamma: float = option(0.99, "discount")
    gae_lambda: float = option(0.95, "GAE lambda")
    clip: float = option(0.2, "PPO ratio clip")
    ent_coef: float = option(0.01, "entropy bonus")
    vf_coef: float = option(0.5, "value-loss weight")
    max_grad_norm: float = option(0.5, "per-task gradient-norm clip")
    hidden: int = option(64, "units of each of the two hidden layers of the actor and of the critic")
    heldout_fraction: float = option(0.25, "fraction of the tasks held out from training the transformer")
    source: Literal["ppo", "noise"] = option(
        "ppo", "source of the histories: ppo (the batched PPO learner, --steps a task) or noise (noise distillation: "
               "Gymnasium's heuristic lander, through each task's engine map, made epsilon-greedy with epsilon "
               "falling over each history of --episodes episodes; no RL)")
    episodes: int = option(40, "noise source: episodes per history (stream); epsilon falls once per episode")

    def __post_init__(self) -> None:
        refuse_choice(self, source=("ppo", "noise"))
        for name in ("tasks", "steps", "streams", "rollout", "epochs", "minibatches", "hidden", "episodes"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.tasks > MAX_TASKS:
            raise UserError(f"--tasks must be at most {MAX_TASKS}, got {self.tasks}")
        low = check_number(self.gravity_low, *GRAVITY, "--gravity-low", open_low=True, open_high=True)
        high = check_number(self.gravity_high, *GRAVITY, "--gravity-high", open_low=True, open_high=True)
        if low > high:
            raise UserError(f"--gravity-low {low} must not exceed --gravity-high {high}")
        check_number(self.wind_fraction, 0.0, 1.0, "--wind-fraction")
        check_number(self.swap_fraction, 0.0, 1.0, "--swap-fraction")
        check_number(self.wind_power_max, *WIND_POWER, "--wind-power-max")
        check_number(self.turbulence_power_max, *TURBULENCE_POWER, "--turbulence-power-max")
        check_number(self.heldout_fraction, 0.0, 1.0, "--heldout-fraction", open_high=True)
        for name in ("learning_rate", "clip"):
            check_number(getattr(self, name), 0.0, 10.0, f"--{name.replace('_', '-')}", open_low=True)
        for name in ("gamma", "gae_lambda"):
            check_number(getattr(self, name), 0.0, 1.0, f"--{name.replace('_', '-')}")
        for name in ("ent_coef", "vf_coef", "max_grad_norm"):
            check_number(getattr(self, name), 0.0, 1e6, f"--{name.replace('_', '-')}")
        check_noise_options(self)
        if self.max_return_fraction != 1.0:
            raise UserError(f"--max-return-fraction {self.max_return_fraction}: the cap needs each task's exact "
                            "expected return, which only the tabular families (darkroom, keydoor, bandit) have; "
                            "use 1 (no cap) on lunarlander")
        if (self.streams * self.rollout) % self.minibatches:
            raise UserError(f"--minibatches {self.minibatches} must divide --streams x --rollout "
                            f"({self.streams * self.rollout})")

    @property
    def updates(self) -> int:
        """PPO rollouts (each followed by ``epochs x minibatches`` optimiser steps) per task."""
        return max(1, -(-self.steps // (self.streams * self.rollout)))
