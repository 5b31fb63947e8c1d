"""Options of `ad demo --model lm` (`LMDemoConfig`). Imports no torch (`ad --help` reads it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option
from ad.errors import UserError

#: --lm choices: a Llama trained from scratch (word tokenizer), or the pretrained default + LoRA
LMS = ("scratch", "smollm2-135m")


@dataclass
class LMDemoConfig:
    """Algorithm Distillation in the Language format on DarkRoom: the RL-format demo's histories as text, a causal
    LM trained on them, evaluated in context on the same held-out goals and seeds beside the RL-format AD."""

    out: str = option("data/demo", "folder of the RL-format demo (reused when present: darkroom/, ad/, ed/, "
                                   "eval/) and of the LM runs lm-<name>/, lm-<name>-ed/, eval-lm/, report-lm.md")
    lm: Literal["scratch", "smollm2-135m"] = option(
        "scratch", "the causal LM: scratch = a Llama-style LM built from a transformers config (`ad train lm "
                   "--preset scratch`: 4 blocks of width 128; the RL-format model has 2 of 64) on a word tokenizer, "
                   "all weights trained; smollm2-135m = the pretrained SmolLM2-135M-Instruct + LoRA on the compact "
                   "template")
    steps: int = option(2000, "optimiser steps of the LM trained on every --subsample-th episode (AD)")
    ed_steps: int = option(1000, "optimiser steps of the LM trained on expert episodes only (this format's ED)")
    batch_size: int = option(16, "windows per optimiser step")
    lr: float = option(1e-3, "peak learning rate (--lm smollm2-135m: of the LoRA adapters; 2e-4 suits it)")
    context: int = option(80, "transitions per training window and most kept when acting (RL demo: 80)")
    subsample: int = option(40, "train on every k-th episode of each history (as the RL-format AD)")
    watch_every: int = option(1000, "held-out in-context return during training every this many steps (0: never)")
    episodes: int = option(100, "episodes in context at evaluation")
    seeds: int = option(3, "evaluation seeds per held-out goal (the RL demo's)")
    seed: int = option(0, "seed of every stage (also of the RL-format demo and its held-out split)")
    threads: int = option(0, "torch CPU threads of the LM stages (0: torch's default, every core: on an idle 2-core "
                             "machine the 4 x 128 LM trains 1.75x and acts 1.5x faster on 2 threads than on 1); the "
                             "RL-format demo it runs first keeps its own default (1) unless this is set")
    train_overrides: dict = option({}, "extra `ad train lm` options for both LM runs, e.g. {n_layer: 2} "
                                       "(YAML/JSON config only)")
    skip_rl: bool = option(False, "do not run the RL-format demo (the LM still needs <out>/darkroom; the report "
                                  "then has no RL-format rows unless <out>/eval/eval.json exists)")

    def __post_init__(self) -> None:
        if self.lm not in LMS:
            raise UserError(f"--lm must be one of {', '.join(LMS)}, got {self.lm!r}")
        for name in ("steps", "ed_steps", "batch_size", "context", "subsample", "episodes", "seeds"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if not 0 < self.lr < 1:  # also refuses NaN and infinities
            raise UserError(f"--lr must be a finite number in (0, 1), got {self.lr}")
        for name in ("watch_every", "threads"):
            if getattr(self, name) < 0:
                raise UserError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
