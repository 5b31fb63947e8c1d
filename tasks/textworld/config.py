"""Options of ``ad generate textworld`` (importing this module does not import torch or start a JVM)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ad.config import option, override, refuse
from ad.errors import UserError
from ad.config.groups import LoRAOptions, WeightsDtypeOptions, dataset_out, run_options
from tasks.textworld.games import GameOptions

#: What PPO's ratio and KL are taken on (``--ppo-ratio``; :mod:`tasks.textworld.ppo`).
PPORatio = Literal["valid-commands", "command-tokens"]


@dataclass
class GenerateConfig(GameOptions, LoRAOptions, WeightsDtypeOptions,
                     run_options("out", "seed", "threads", "progress")):
    """Play CookingWorld with an LM that scores the valid commands: the base LM, SFT on gold paths (trl's
    SFTTrainer, LoRA), then step-wise PPO with a value head; every episode of every phase logged.

    The defaults are sized for ~4000 move-equivalents (scoring one move; a trained move costs ~3), an estimated
    20-35 minutes of SmolLM2-135M on 2 idle CPU cores; the figures' run is larger (see tasks.textworld)."""

    out: str = dataset_out("data/textworld")
    model: str = option("smollm2-135m", "policy LM: smollm2-135m (offline, packaged), a save_pretrained folder or "
                                        "a cached hub id")
    eval_games: int = option(16, "games of each fold (test = held out, train) played greedily after each phase")
    train_eval_games: int = option(0, "train-fold games (the first SFT games: games the policy was trained on) "
                                      "played greedily after each phase beside the held-out ones, to show a train / "
                                      "held-out gap; 0 = as many as --eval-games")
    history: int = option(1, "earlier moves shown in full in the prompt; older commands are listed on one "
                             "'Moves so far' line")
    pinned_commands: list[str] = option(["read cookbook"], "commands whose newest result stays in the prompt after "
                                        "the move leaves the history (read cookbook = the recipe: which cut and "
                                        "cooking each ingredient needs; a wrong one fails the game); 'none' pins "
                                        "nothing")
    transcript: bool = option(False, "the whole game so far as the prompt (--history and --pinned-commands then do "
                                     "nothing), each game's keys and values cached between moves; SFT learns a whole "
                                     "game from one row. Needs --max-prompt-tokens of a whole game: at least 256 x "
                                     "--step-limit")
    max_prompt_tokens: int = option(512, "prompt tokens kept: beyond this the oldest shown steps are cut and the "
                                         "task line, move list and pinned results stay")
    sft_games: int = option(32, "train-fold games whose gold action sequences are the SFT demonstrations")
    sft_epochs: float = option(1.0, "passes over the demonstrations (trl SFTTrainer num_train_epochs)")
    sft_learning_rate: float = option(5e-4, "SFT learning rate (LoRA weights)", aliases=("sft_lr",))
    sft_batch_size: int = option(8, "demonstrated moves (whole games with --transcript) per SFT optimiser step "
                                    "(activations are kept, so memory grows with it and --max-prompt-tokens)")
    sft_micro_batch_size: int = option(0, "moves (games with --transcript) per forward / backward pass within an "
                                          "SFT step (a divisor of "
                                          "--sft-batch-size; 0 = the whole batch): the same gradient, the "
                                          "activations of one micro-batch at a time in memory")
    ppo_iterations: int = option(2, "PPO iterations (collect rollouts on train-fold games, then optimise)")
    ppo_games: int = option(8, "train-fold games played (sampled) per PPO iteration, in one batch")
    ppo_epochs: int = option(1, "optimisation passes over each iteration's moves")
    ppo_batch_size: int = option(16, "moves per PPO optimiser step")
    ppo_micro_batch_size: int = option(4, "moves (games with --transcript) per forward / backward pass within a "
                                          "PPO step (0 = the whole minibatch): the same gradient, the activations "
                                          "of one micro-batch at a time in memory")
    ppo_learning_rate: float = option(1e-4, "PPO learning rate (LoRA weights and the value head)",
                                      aliases=("ppo_lr",))
    ppo_ratio: PPORatio = option(
        "valid-commands", "what PPO's clipped ratio and KL penalty are taken on: valid-commands = the distribution "
        "the policy acts by (softmax of the valid commands' scores at --temperature, every one rescored, exact KL "
        "to the SFT policy); command-tokens = the chosen command's token log-probabilities (cheaper)")
    ppo_target_kl: float = option(0.0, "stop an iteration's PPO update once the policy moved more than 1.5 x this "
                                  "approximate KL from the one that played (checked before each minibatch step; "
                                  "0 = off, run every epoch)")
    clip: float = option(0.2, "PPO clip range of the policy ratio")
    value_clip: float = option(0.2, "clip range of the value update (0 = no clipping)")
    vf_coef: float = option(0.5, "weight of the value loss")
    beta: float = option(0.05, "weight of the KL penalty to the SFT policy (the reference)", aliases=("kl_coef",))
    gamma: float = option(0.99, "discount over moves")
    gae_lambda: float = option(0.95, "GAE lambda", aliases=("lam",))
    temperature: float = option(1.0, "sampling temperature over the valid commands while collecting PPO rollouts")
    act_batch: int = option(64, "games advanced together in one batched scoring pass", runtime=True)
    target_modules: list[str] = override(LoRAOptions, "target_modules", ["all-linear"])

    def train_eval_count(self) -> int:
        """Train-fold games evaluated after each phase."""
        return self.train_eval_games or self.eval_games

    def prompt_window(self) -> tuple[int, list[str]]:
        """(earlier moves shown, pinned commands) of the prompts: every move and no pin with ``transcript``."""
        return (self.step_limit, []) if self.transcript else (self.history, list(self.pinned_commands))

    def __post_init__(self) -> None:
        super().__post_init__()
        refuse(self, ("eval_games", "sft_games", "sft_batch_size", "ppo_games", "ppo_epochs", "ppo_batch_size",
                      "act_batch", "max_prompt_tokens"), lambda v: v < 1, "must be at least 1")
        if self.sft_micro_batch_size < 0 or (self.sft_micro_batch_size and
                                             self.sft_batch_size % self.sft_micro_batch_size):
            raise UserError(f"--sft-micro-batch-size must divide --sft-batch-size ({self.sft_batch_size}) or be 0, "
                            f"got {self.sft_micro_batch_size}")
        if self.transcript and self.max_prompt_tokens < 256 * self.step_limit:
            raise UserError(f"--transcript keeps whole games in the prompt: give --max-prompt-tokens at least 256 x "
                            f"--step-limit = {256 * self.step_limit} (got {self.max_prompt_tokens}); SmolLM2's "
                            "context is 8192")
        if [c.strip().lower() for c in self.pinned_commands] == ["none"]:
            self.pinned_commands = []
        if any(not c.strip() for c in self.pinned_commands):
            raise UserError(f"--pinned-commands must name commands (or 'none'), got {self.pinned_commands!r}")
        refuse(self, ("history", "ppo_iterations", "threads", "ppo_micro_batch_size", "train_eval_games"),
               lambda v: v < 0, "must be >= 0")
        refuse(self, ("sft_epochs", "sft_learning_rate", "ppo_learning_rate", "temperature"),
               lambda v: not (math.isfinite(v) and v > 0), "must be a positive number")
        refuse(self, ("clip", "value_clip", "vf_coef", "beta", "ppo_target_kl"),
               lambda v: not (math.isfinite(v) and v >= 0), "must be a finite number >= 0")
        refuse(self, ("gamma", "gae_lambda"), lambda v: not (math.isfinite(v) and 0 <= v <= 1), "must be in [0, 1]")
        if max(self.eval_games, self.train_eval_games, self.sft_games, self.ppo_games) > 1000:
            raise UserError("a TextWorldExpress fold has 1000 games: keep --eval-games, --train-eval-games, "
                            "--sft-games and --ppo-games at most 1000")
