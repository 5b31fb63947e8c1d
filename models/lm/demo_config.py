"""Options of `ad demo --model lm` (`LMDemoConfig`). Imports no torch (`ad --help` reads it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option
from ad.errors import UserError

#: --lm choices: a Llama trained from scratch (word tokenizer), or the pretrained default + LoRA
LMS = ("scratch", "smollm2-135m")
#: Per DarkRoom source: the LM's context (transitions), subsampling, AD and ED steps when left at 0. The explorer's
#: histories are near-optimal after ~10 of their 60 episodes, so the LM reads them whole with 5 episodes in context
#: (the LM from scratch: 0.97-0.98 at episodes 36-40 on 2 seeds, BENCHMARKS.md #18); the A2C's take ~1000 episodes,
#: so it reads every 40th with 4 in context (0.52-0.66 there).
SOURCE_DEFAULTS = {"explorer": {"context": 100, "subsample": 1, "steps": 2000, "ed_steps": 500},
                   "a2c": {"context": 80, "subsample": 40, "steps": 2000, "ed_steps": 1000}}


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
    source: Literal["explorer", "a2c"] = option(
        "explorer", "DarkRoom source whose histories both formats distil (`ad demo --source`): explorer (searches "
                    "the room systematically; the default) or a2c (the AD paper's source)")
    steps: int = option(0, "optimiser steps of the LM trained on every --subsample-th episode (AD); 0 = the "
                           "source's default (2000)")
    ed_steps: int = option(0, "optimiser steps of the LM trained on expert episodes only (this format's ED); 0 = the "
                              "source's default (explorer 500, a2c 1000)")
    batch_size: int = option(16, "windows per optimiser step")
    lr: float = option(1e-3, "peak learning rate (--lm smollm2-135m: of the LoRA adapters; 2e-4 suits it)")
    context: int = option(0, "transitions per training window and most kept when acting, for both formats; 0 = the "
                             "source's default (explorer 100 = 5 episodes, a2c 80)")
    subsample: int = option(0, "train on every k-th episode of each history (both formats); 0 = the source's "
                               "default (explorer 1, a2c 40)")
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
        if self.source not in SOURCE_DEFAULTS:
            raise UserError(f"--source must be one of {', '.join(SOURCE_DEFAULTS)}, got {self.source!r}")
        for name, value in SOURCE_DEFAULTS[self.source].items():
            if getattr(self, name) == 0:
                setattr(self, name, value)
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
