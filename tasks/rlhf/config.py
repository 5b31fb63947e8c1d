"""Options of ``ad generate rlhf`` (importing this module does not import torch or trl)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ad.config import option, override, refuse
from ad.errors import UserError
from ad.config.groups import LoRAOptions, dataset_out, run_options

#: The bundled story openers (written for this project, CC0).
BUNDLED_PROMPTS = str(Path(__file__).with_name("prompts.txt"))


@dataclass
class GenerateConfig(LoRAOptions,
                     run_options("out", "seed", "threads", "progress", "tensorboard", "plots")):
    """Train a causal LM toward positive sentiment with trl's GRPO and log every completion as a learning history."""

    out: str = dataset_out("data/rlhf")
    model: str = option("smollm2-135m", "policy: smollm2-135m (offline, packaged), a save_pretrained folder or a "
                        "cached hub id")
    reward: str = option("vader", "reward: 'vader' (VADER compound score of the completion) or 'module:function' "
                         "called like a trl reward function: f(prompts=[...], completions=[...], **kw) -> list[float]")
    prompts: str = option(BUNDLED_PROMPTS, "text file with one prompt per line ('#' lines are comments)")
    heldout_fraction: float = option(0.2, "fraction of the prompts held out from training (recorded in metadata)")
    max_steps: int = option(80, "GRPO optimiser steps (training iterations)", aliases=("steps",))
    chunk_steps: int = option(10, "training iterations per committed unit (resume granularity)")
    num_generations: int = option(8, "completions per prompt (GRPO group size); one history stream per position")
    prompts_per_step: int = option(2, "prompts per training iteration")
    max_new_tokens: int = option(32, "completion length limit in tokens")
    temperature: float = option(1.0, "sampling temperature of the behaviour policy")
    learning_rate: float = option(2e-4, "AdamW learning rate (LoRA parameters, or all parameters without LoRA)",
                                  aliases=("lr",))
    beta: float = option(0.01, "KL coefficient toward the base model (keeps completions fluent; 0 = none, trl's "
                               "default; with LoRA the base is the model with the adapter disabled, no extra copy)")
    lora: bool = option(True, "train a LoRA adapter (the LoRA options below) instead of all weights")
    target_modules: list[str] = override(LoRAOptions, "target_modules", ["all-linear"])
    eval_prompts: int = option(32, "held-out prompts scored before and after training (0 = skip)", runtime=True)
    run_dir: str = option("", "local folder for checkpoints (the resume point), TensorBoard, summary.json and the "
                              "reward curve (default: <out>/_run for a local --out, runs/generate-<name> for a "
                              "remote URL)", runtime=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        refuse(self, ("max_steps", "chunk_steps", "num_generations", "prompts_per_step", "max_new_tokens"),
               lambda v: v <= 0, "must be positive")
        if self.num_generations < 2:
            raise UserError("--num-generations must be at least 2: GRPO's advantage compares completions of a group")
        refuse(self, ("temperature",), lambda v: v <= 0, "must be positive")
        if self.learning_rate <= 0 or self.beta < 0:
            raise UserError("--learning-rate must be positive and --beta non-negative")
        refuse(self, ("heldout_fraction",), lambda v: not 0.0 < v < 1.0, "must be in (0, 1)")
        if self.eval_prompts < 0 or self.threads < 0:
            raise UserError("--eval-prompts and --threads must be >= 0")

    @property
    def completions_per_step(self) -> int:
        """Rows logged per training iteration."""
        return self.num_generations * self.prompts_per_step
