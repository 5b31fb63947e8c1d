"""Options of ``ad generate math`` (importing this module does not import torch or trl)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, override, refuse
from ad.errors import UserError
from ad.config.groups import LoRAOptions, WeightsDtypeOptions, cpu_has_fast_bfloat16, dataset_out, run_options
from tasks.math.problems import LEVELS


@dataclass
class GenerateConfig(LoRAOptions, WeightsDtypeOptions, run_options("out", "seed", "threads", "progress", "plots")):
    """REINFORCE (trl's RLOO: leave-one-out baseline) with a KL penalty to a reference policy refreshed every k
    iterations, on math word problems; every sampled solution logged as a learning history."""

    #: ``--preset`` values: standard = the GPU run's recipe through trl's RLOOTrainer (the defaults below); cpu = the
    #: same recipe through the batched engine (:mod:`tasks.math.reinforce`) at the scale an hour on 2 cores allows.
    PRESETS = {
        "standard": {},
        "cpu": {"engine": "fast", "problems_per_step": 4, "max_steps": 60, "max_new_tokens": 96,
                "dtype": "bfloat16" if cpu_has_fast_bfloat16() else "float32"},  # bfloat16 where it is fast
    }

    preset: str = option(
        "standard", "standard: trl's RLOOTrainer at the GPU run's scale (60 iterations x 16 problems x 8 solutions); "
                    "cpu: the batched engine at a CPU's scale (4 problems per iteration); explicit options override "
                    "the preset's")
    engine: Literal["trl", "fast"] = option(
        "trl", "trl: trl's RLOOTrainer; fast: the same loss with a batched sampler (each prompt read once per group), "
               "reference log-probabilities from the base model with the adapter off (or a saved copy of the "
               "adapter when refreshed), no second model (needs LoRA)")
    out: str = dataset_out("data/math")
    model: str = option("smollm2-135m", "policy: smollm2-135m (offline, packaged), a save_pretrained folder or a "
                        "cached hub id")
    problems: str = option("", "GSM8K-format jsonl file (one {'question', 'answer': '... #### n'} per line); "
                               "empty = the built-in generated word problems")
    level: int = option(1, "difficulty of generated problems: the number of operations in the story, 1-3")
    train_problems: int = option(2000, "generated training problems (drawn from the training templates)")
    heldout_fraction: float = option(0.25, "fraction held out: of the templates (generated problems: held-out "
                                           "stories never seen in training) or of the problems of --problems")
    max_steps: int = option(60, "training iterations (one RLOO optimiser step each, problems-per-step x "
                                "num-generations sampled solutions)", aliases=("iterations",))
    chunk_steps: int = option(10, "training iterations per committed unit (resume granularity)")
    num_generations: int = option(8, "sampled solutions per problem (the group of the leave-one-out baseline); one "
                                      "history stream per position in the group")
    problems_per_step: int = option(16, "problems per training iteration")
    max_new_tokens: int = option(96, "solution length limit in tokens")
    temperature: float = option(0.7, "sampling temperature of the behaviour policy")
    learning_rate: float = option(3e-4, "AdamW learning rate (LoRA parameters, or all parameters without LoRA)",
                                  aliases=("lr",))
    beta: float = option(0.05, "coefficient of the KL penalty to the reference policy (subtracted from the reward, "
                               "as in the seed; 0 = none)")
    ref_refresh: int = option(10, "refresh the reference policy (copy the current policy into it) every this many "
                                  "iterations (the seed's update_ref_iterations)")
    refresh: bool = option(True, "refresh the reference at all; --no-refresh keeps the initial policy as the "
                                 "reference for the whole run (k = infinity)")
    format_reward: float = option(0.1, "extra reward for marking the final answer ('#### n', \\boxed{n} or "
                                       "'answer is n'), right or wrong")
    few_shot: int = option(0, "worked examples (from the training problems) shown before each problem")
    lora: bool = option(True, "train a LoRA adapter (the LoRA options below) instead of all weights")
    target_modules: list[str] = override(LoRAOptions, "target_modules", ["all-linear"])
    eval_problems: int = option(200, "held-out problems scored greedily before and after training (0 = skip)", runtime=True)
    run_dir: str = option("", "local folder for checkpoints (the resume point), summary.json and the reward curve "
                              "(default: <out>/_run for a local --out, runs/generate-<name> for a remote URL)", runtime=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.level not in LEVELS:
            raise UserError(f"unknown difficulty --level {self.level}; levels are {', '.join(map(str, LEVELS))}")
        refuse(self, ("max_steps", "chunk_steps", "num_generations", "problems_per_step", "max_new_tokens",
                      "train_problems"), lambda v: v <= 0, "must be positive")
        if self.ref_refresh <= 0:
            raise UserError(f"--ref-refresh must be a positive number of iterations, got {self.ref_refresh}; "
                            "use --no-refresh to never refresh the reference (k = infinity)")
        if self.num_generations < 2:
            raise UserError("--num-generations must be at least 2: the leave-one-out baseline compares the "
                            "solutions of a group")
        if self.temperature <= 0 or self.learning_rate <= 0:
            raise UserError(f"--temperature and --learning-rate must be positive, got {self.temperature}, "
                            f"{self.learning_rate}")
        if self.beta < 0 or self.format_reward < 0:
            raise UserError(f"--beta and --format-reward must be >= 0, got {self.beta}, {self.format_reward}")
        if self.refresh and self.beta == 0:
            raise UserError("--beta 0 has no reference policy to refresh; give --beta > 0 or --no-refresh")
        refuse(self, ("heldout_fraction",), lambda v: not 0.0 < v < 1.0, "must be in (0, 1)")
        if self.engine == "fast" and not self.lora:
            raise UserError("--engine fast trains a LoRA adapter (its reference is the base model with the adapter "
                            "off); use --lora or --engine trl")
        if self.engine == "trl" and self.dtype != "float32":
            raise UserError(f"--dtype {self.dtype} needs --engine fast (or --preset cpu): the trl engine trains in "
                            "float32")
        if self.few_shot < 0 or self.eval_problems < 0 or self.threads < 0:
            raise UserError("--few-shot, --eval-problems and --threads must be >= 0")

    @property
    def completions_per_step(self) -> int:
        """Rows logged per training iteration."""
        return self.num_generations * self.problems_per_step

    @property
    def refresh_every(self) -> int | None:
        """Iterations between reference refreshes (None = never, k = infinity)."""
        return self.ref_refresh if self.refresh else None
