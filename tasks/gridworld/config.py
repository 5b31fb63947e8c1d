"""Options of ``ad generate gridworld`` (importing this module does not import torch or trl)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, override, refuse, refuse_choice
from ad.errors import UserError
from ad.config.memory import check_memory
from ad.config.groups import LoRAOptions, WeightsDtypeOptions, dataset_out, run_options

#: Memory of one start/goal configuration while the split is drawn (a 5-tuple of ints, the lists holding it, the
#: shuffled order).
CONFIG_BYTES = 400

#: Styles of the prompt's state text (see tasks.gridworld.env.state_text).
STATE_TEXTS = ("absolute", "egocentric")

PHASES = ("critic", "simpo")


@dataclass
class GenerateConfig(LoRAOptions, WeightsDtypeOptions,
                     run_options("out", "seed", "threads", "progress", "tensorboard", "plots")):
    """LLM actor on the grid world: Monte-Carlo critic with the actor frozen, then SimPO on ranked
    pairs of move lists; every episode of every phase logged as a learning history."""

    out: str = dataset_out("data/gridworld")
    size: int = option(4, "grid side length (>= 2)")
    phases: list[Literal["critic", "simpo"]] = option(["critic", "simpo"], "phases to run, in order", runtime=True)
    model: str = option("smollm2-135m", "actor LM: smollm2-135m (offline, packaged), a save_pretrained folder or a "
                        "cached hub id")
    clip_at_wall: bool = option(False, "moves into a wall leave the agent in place instead of ending the episode")
    goal_reward: float = option(1.0, "reward for reaching the goal")
    move_cost: float = option(0.01, "cost of every executed move")
    offmap_penalty: float = option(1.0, "penalty for leaving the grid (ends the episode)")
    state_text: Literal["absolute", "egocentric"] = option("egocentric", "state text of the prompt: 'absolute' (position, orientation, goal; seed "
                             "000) or 'egocentric' (the same + where the goal lies from the agent's heading, e.g. "
                             "'2 cells ahead and 1 cell to your left')")
    max_turns: int = option(6, "move lists per episode (TimeLimit)")
    max_moves: int = option(4, "longest move list the actor may propose in one turn")
    heldout_fraction: float = option(0.2, "fraction of start/goal configurations held out from training")
    num_envs: int = option(32, "envs stepped in lockstep by the batched actor")
    temperature: float = option(1.0, "sampling temperature of the actor during data collection")
    gamma: float = option(0.95, "discount of the Monte-Carlo returns and of the critic advantage")
    critic_episodes: int = option(256, "episodes collected with the frozen actor for the critic phase")
    critic_epochs: int = option(200, "value-head training epochs on the collected returns")
    critic_learning_rate: float = option(1e-3, "value-head learning rate", aliases=("critic_lr",))
    simpo_iterations: int = option(5, "SimPO iterations (sample pairs, train, checkpoint, commit)")
    simpo_states: int = option(256, "start states sampled per SimPO iteration")
    simpo_samples: int = option(2, "move lists sampled per start state (LactChain's recipe: 2); the worst by reward + "
                                "discounted critic value is its pair's rejected list (and the best its chosen one "
                                "with --simpo-chosen sampled)")
    simpo_chosen: Literal["sampled", "all"] = option("all", "where a pair's chosen move list comes from: 'sampled' = the best of the "
                               "--simpo-samples policy samples (LactChain); 'all' = the best of every valid move list, "
                               "each scored like a sample with the env's dynamics (the rejected list stays the worst "
                               "policy sample)")
    progress_bonus: float = option(0.5, "potential-based shaping of the pair ranking: value lowered by this much per "
                                   "cell of Manhattan distance from the goal after the move list (0 = critic only)")
    simpo_epochs: int = option(2, "passes over each iteration's preference pairs")
    simpo_beta: float = option(2.0, "SimPO beta (reward scale)")
    simpo_gamma: float = option(0.5, "SimPO target reward margin (trl's simpo_gamma)")
    simpo_nll: float = option(1.0, "weight of an NLL (behaviour-cloning) term on the chosen move list, trl's "
                              "cpo_alpha (CPO-SimPO); 0 = pure SimPO")
    simpo_trainer: Literal["shared-prefix", "trl"] = option("shared-prefix", "SimPO implementation: 'shared-prefix' (the prompts' common opening "
                                "runs once per batch; prompts and completions tokenized as the actor sees them) or "
                                "'trl' (trl's CPOTrainer, loss_type=simpo); same loss")
    simpo_learning_rate: float = option(1e-3, "SimPO learning rate (LoRA parameters)", aliases=("simpo_lr",))
    simpo_batch: int = option(16, "SimPO pairs per optimiser step")
    target_modules: list[str] = override(LoRAOptions, "target_modules", ["all-linear"])  # the actor's adapter
    eval_episodes: int = option(64, "held-out episodes evaluated (greedy) before and after SimPO (0 = skip)")
    run_dir: str = option("", "local folder for checkpoints (critic, adapters: the resume point), TensorBoard, "
                              "summary.json and plots (default: <out>/_run for a local --out, runs/generate-<name> "
                              "for a remote URL)", runtime=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        refuse(self, ("size",), lambda v: v < 2, "must be at least 2")
        configs = 4 * self.size**2 * (self.size**2 - 1)  # every start, orientation and goal: the split draws from them
        check_memory(CONFIG_BYTES * configs, f"--size {self.size} ({configs:,} start/goal configurations)",
                     "pass a smaller --size")
        if isinstance(self.phases, str):
            self.phases = [self.phases]
        bad = [p for p in self.phases if p not in PHASES]
        if bad or not self.phases:
            raise UserError(f"--phases must list some of {', '.join(PHASES)}, got {self.phases!r}")
        refuse(self, ("max_turns", "max_moves", "num_envs", "critic_episodes", "critic_epochs", "simpo_iterations",
                      "simpo_states", "simpo_epochs", "simpo_batch"), lambda v: v <= 0, "must be positive")
        refuse_choice(self, state_text=STATE_TEXTS, simpo_chosen=("sampled", "all"),
                      simpo_trainer=("shared-prefix", "trl"))
        refuse(self, ("simpo_samples",), lambda v: v < 2, "must be at least 2 (a pair)")
        refuse(self, ("max_moves",), lambda v: v > 6, "must be at most 6 (the actor enumerates 3^k move lists)")
        refuse(self, ("heldout_fraction",), lambda v: not 0.0 < v < 1.0, "must be in (0, 1)")
        if self.temperature <= 0 or not 0.0 < self.gamma <= 1.0:
            raise UserError("--temperature must be positive and --gamma in (0, 1]")
        if (min(self.critic_learning_rate, self.simpo_learning_rate, self.simpo_beta) <= 0 or self.move_cost < 0
                or self.offmap_penalty < 0):
            raise UserError("--critic-learning-rate, --simpo-learning-rate, --simpo-beta must be positive; --move-cost "
                            "and --offmap-penalty non-negative")
        if min(self.eval_episodes, self.threads, self.progress_bonus, self.simpo_nll) < 0:
            raise UserError("--eval-episodes, --threads, --progress-bonus and --simpo-nll must be >= 0")

    @property
    def phase_list(self) -> list[str]:
        """The phases to run, in order."""
        return list(self.phases)
