"""Options of ``ad generate gridworld`` (importing this module does not import torch or trl)."""
from __future__ import annotations

from dataclasses import dataclass

from ad.config import option
from ad.errors import UserError

PHASES = ("critic", "simpo")


@dataclass
class GenerateConfig:
    """LLM actor on the grid world (seed 000): Monte-Carlo critic with the actor frozen, then SimPO on ranked
    pairs of move lists; every episode of every phase logged as a learning history."""

    out: str = option("data/gridworld", "output dataset folder (re-running the same command resumes)")
    size: int = option(4, "grid side length (>= 2)")
    phases: str = option("critic,simpo", "comma-separated phases to run, in order: critic, simpo")
    model: str = option("smollm2-135m", "actor LM: smollm2-135m (offline, packaged), a save_pretrained folder or a "
                        "cached hub id")
    clip_at_wall: bool = option(False, "moves into a wall leave the agent in place instead of ending the episode")
    goal_reward: float = option(1.0, "reward for reaching the goal")
    move_cost: float = option(0.01, "cost of every executed move")
    offmap_penalty: float = option(1.0, "penalty for leaving the grid (ends the episode)")
    max_turns: int = option(6, "move lists per episode (TimeLimit)")
    max_moves: int = option(4, "longest move list the actor may propose in one turn")
    heldout_fraction: float = option(0.2, "fraction of start/goal configurations held out from training")
    num_envs: int = option(32, "envs stepped in lockstep by the batched actor")
    temperature: float = option(1.0, "sampling temperature of the actor during data collection")
    gamma: float = option(0.95, "discount of the Monte-Carlo returns and of the critic advantage")
    critic_episodes: int = option(256, "episodes collected with the frozen actor for the critic phase")
    critic_epochs: int = option(200, "value-head training epochs on the collected returns")
    critic_lr: float = option(1e-3, "value-head learning rate")
    simpo_iterations: int = option(8, "SimPO iterations (sample pairs, train, checkpoint, commit)")
    simpo_states: int = option(64, "start states sampled per SimPO iteration")
    simpo_samples: int = option(2, "move lists sampled per start state (seed 000: 2); the best and the worst by "
                                "reward + discounted critic value form its preference pair")
    progress_bonus: float = option(0.0, "potential-based shaping of the pair ranking: value lowered by this much per "
                                   "cell of Manhattan distance from the goal after the move list (0 = critic only)")
    simpo_epochs: int = option(2, "passes over each iteration's preference pairs")
    simpo_beta: float = option(2.0, "SimPO beta (reward scale)")
    simpo_gamma: float = option(0.5, "SimPO target reward margin (trl's simpo_gamma)")
    simpo_nll: float = option(0.0, "weight of an NLL (behaviour-cloning) term on the chosen move list, trl's "
                              "cpo_alpha (CPO-SimPO); 0 = pure SimPO")
    simpo_lr: float = option(5e-5, "SimPO learning rate (LoRA parameters)")
    simpo_batch: int = option(16, "SimPO pairs per optimiser step")
    lora_r: int = option(16, "LoRA rank of the actor adapter")
    lora_alpha: int = option(32, "LoRA alpha")
    eval_episodes: int = option(64, "held-out episodes evaluated (greedy) before and after SimPO (0 = skip)")
    seed: int = option(0, "seed of sampling and of the train/held-out split; recorded as run")
    threads: int = option(0, "torch CPU threads (0 = torch's default)")
    tensorboard: bool = option(True, "write TensorBoard scalars under <out>/_run/tb")
    plots: bool = option(True, "save success / off-map rate over training (PNG) under <out>/_run")
    progress: bool = option(True, "show progress bars")

    def __post_init__(self) -> None:
        if self.size < 2:
            raise UserError(f"--size must be at least 2, got {self.size}")
        phases = [p.strip() for p in self.phases.split(",") if p.strip()]
        bad = [p for p in phases if p not in PHASES]
        if bad or not phases:
            raise UserError(f"--phases must list some of {', '.join(PHASES)} (comma-separated), got {self.phases!r}")
        for name in ("max_turns", "max_moves", "num_envs", "critic_episodes", "critic_epochs", "simpo_iterations",
                     "simpo_states", "simpo_epochs", "simpo_batch", "lora_r", "lora_alpha"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.simpo_samples < 2:
            raise UserError(f"--simpo-samples must be at least 2 (a pair), got {self.simpo_samples}")
        if self.max_moves > 6:
            raise UserError(f"--max-moves must be at most 6 (the actor enumerates 3^k move lists), "
                            f"got {self.max_moves}")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise UserError(f"--heldout-fraction must be in (0, 1), got {self.heldout_fraction}")
        if self.temperature <= 0 or not 0.0 < self.gamma <= 1.0:
            raise UserError("--temperature must be positive and --gamma in (0, 1]")
        if min(self.critic_lr, self.simpo_lr, self.simpo_beta) <= 0 or self.move_cost < 0 or self.offmap_penalty < 0:
            raise UserError("--critic-lr, --simpo-lr, --simpo-beta must be positive; --move-cost and "
                            "--offmap-penalty non-negative")
        if min(self.eval_episodes, self.threads, self.progress_bonus, self.simpo_nll) < 0:
            raise UserError("--eval-episodes, --threads, --progress-bonus and --simpo-nll must be >= 0")

    @property
    def phase_list(self) -> list[str]:
        """The phases to run, in order."""
        return [p.strip() for p in self.phases.split(",") if p.strip()]
