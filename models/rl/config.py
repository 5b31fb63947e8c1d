"""Configs of the AD transformer (`ADConfig`) and of `ad train rl` (`TrainRLConfig`).

This module imports no torch so that `ad --help` stays fast. `TrainRLConfig`
extends `ADConfig`: the model options are the same fields, and the model's own
config is the `ADConfig` subset of a training config (`model_config_of`).
Fields that describe the data (`num_states`, `state_dim`, `num_actions`,
`episode_length`) are 0 in a training config ("take it from the dataset").
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from ad.config import option, override, refuse, refuse_choice, runtime_fields
from ad.distributed.options import DistributedOptions, check_distributed_options
from ad.errors import UserError
from ad.config.groups import RunOptions, TrainingOptions, continue_post_init, run_options

LAYOUTS = ("transition", "separate")
REWARD_KINDS = ("discrete", "continuous")
#: Training objectives of ``ad train rl`` (``--objective``): the action head's target.
OBJECTIVES = ("ad", "ed", "dpt")
#: DPT's targets (``--dpt-target``): the window's own task's optimal action, or its expectation over the tasks the
#: window allows.
DPT_TARGETS = ("optimal", "posterior")
ACTION_HEADS = ("bins", "gaussian")


@dataclass
class ADConfig:
    """A causal transformer over RL-format windows (Algorithm Distillation)."""

    layout: str = option("transition", "token layout: 'transition' = one token per transition "
                                       "(state_t + previous action + previous reward); 'separate' = "
                                       "state, action and reward tokens as in the AD paper (3x the tokens)")
    n_layer: int = option(2, "transformer blocks")
    n_head: int = option(4, "attention heads (must divide n_embd)")
    n_embd: int = option(64, "width of the residual stream")
    n_ff: int = option(256, "hidden width of each block's feed-forward layer")
    attn_dropout: float = option(0.0, "dropout on attention weights")
    resid_dropout: float = option(0.0, "dropout on each block's attention / feed-forward output")
    embd_dropout: float = option(0.0, "dropout on the token embeddings")
    context: int = option(80, "context length in transitions (the training window length)")
    num_states: int = option(0, "number of discrete states (0: vector states, or take it from the dataset)")
    state_dim: int = option(0, "length of vector states (0: discrete states, or take it from the dataset)")
    num_actions: int = option(0, "number of discrete actions (0: Box actions, or take it from the dataset)")
    action_dim: int = option(0, "length of Box (continuous) actions (0: discrete actions, or take it from the dataset)")
    action_low: list[float] = option([], "lower bound of each Box action dimension (empty: from the dataset's "
                                         "task_spec.action_space)")
    action_high: list[float] = option([], "upper bound of each Box action dimension (empty: from the dataset's "
                                          "task_spec.action_space)")
    action_head: str = option("bins", "head of Box actions: 'bins' = --action-bins classes per dimension, trained by "
                                      "cross-entropy; 'gaussian' = a tanh-squashed Gaussian per dimension (mean and "
                                      "log-std), trained by the log-likelihood of the recorded action")
    action_bins: int = option(11, "bins per Box action dimension, evenly spaced from the lower to the upper bound "
                                  "(with --action-head bins)")
    normalize_states: bool = option(False, "standardise vector states before embedding them: subtract the training "
                                           "windows' per-dimension mean, divide by their std (the statistics are "
                                           "stored with the model, so evaluation applies the same)")
    state_mean: list[float] = option([], "per-dimension mean of the vector states, with --normalize-states (empty: "
                                         "from the training windows)")
    state_std: list[float] = option([], "per-dimension std of the vector states, with --normalize-states (empty: "
                                        "from the training windows; a constant dimension gets 1)")
    episode_length: int = option(0, "longest episode: in-episode time steps 0..episode_length-1 are embedded "
                                     "(0: take it from the dataset)")
    grid_size: int = option(0, "discrete states that are cells of a square grid of this side: embed state s as "
                                "row (s // n) + column (s % n) embeddings, which generalises to cells never seen in "
                                "training (0: one learned embedding per state)")
    position_embedding: bool = option(False, "add a learned embedding of each transition's position in the window "
                                             "(besides the in-episode time step)")
    time_embedding: bool = option(True, "add a learned embedding of each transition's in-episode time step; off "
                                        "(--time-embedding false): time steps are not read, so the model acts in "
                                        "episodes of any length, e.g. one trained on single-step episodes (the DPT "
                                        "paper's transformer has no such embedding)")
    reward_kind: str = option("discrete", "'discrete': rewards are the integers 0..num_rewards-1, embedded and "
                                          "classified; 'continuous': a float, projected and regressed (MSE)")
    num_rewards: int = option(2, "number of reward values when reward_kind is discrete")
    action_weight: float = option(1.0, "loss weight of the action head (predicts a_t from the context up to s_t)")
    state_weight: float = option(0.1, "loss weight of the next-state head (predicts s_t+1 given s_t and the "
                                      "true a_t); 0 turns the head off")
    reward_weight: float = option(0.1, "loss weight of the reward head (predicts r_t given s_t and the true "
                                       "a_t); 0 turns the head off")
    logprob_weight: float = option(0.0, "loss weight of the logprob head (regresses the behaviour policy's "
                                        "log-probability of a_t); 0 turns the head off")

    def __post_init__(self) -> None:
        refuse_choice(self, layout=LAYOUTS, reward_kind=REWARD_KINDS)
        refuse(self, ("n_layer", "n_head", "n_embd", "n_ff", "context"), lambda v: v < 1, "must be at least 1")
        if self.n_embd % self.n_head:
            raise UserError(f"--n-embd ({self.n_embd}) must be a multiple of --n-head ({self.n_head})")
        refuse(self, ("attn_dropout", "resid_dropout", "embd_dropout"), lambda v: not 0.0 <= v < 1.0,
               "must be in [0, 1)")
        refuse(self, ("grid_size",), lambda v: v < -1, "must be >= 0 (or -1: from the dataset)")
        if self.grid_size > 0 and self.num_states and self.num_states != self.grid_size ** 2:
            raise UserError(f"--grid-size {self.grid_size} needs --num-states = {self.grid_size ** 2}, got {self.num_states}")
        refuse(self, ("num_states", "state_dim", "num_actions", "episode_length"), lambda v: v < 0, "must be >= 0")
        if self.num_states and self.state_dim:
            raise UserError("set --num-states (discrete states) or --state-dim (vector states), not both")
        _check_box_actions(self)
        _check_state_statistics(self)
        if self.reward_kind == "discrete" and self.num_rewards < 1:
            raise UserError(f"--num-rewards must be at least 1 for discrete rewards, got {self.num_rewards}")
        weights = [self.action_weight, self.state_weight, self.reward_weight, self.logprob_weight]
        if min(weights) < 0 or max(weights) == 0:
            raise UserError("the loss weights (--action-weight, --state-weight, --reward-weight, --logprob-weight) "
                            "must be >= 0 and at least one of them > 0")
        continue_post_init(ADConfig, self)

    def check_complete(self) -> None:
        """Raise a UserError unless the data-dependent sizes are set (needed to build a model)."""
        if not (self.num_states or self.state_dim):
            raise UserError("the model config needs num_states (discrete states) or state_dim (vector states)")
        if not (self.num_actions or self.action_dim):
            raise UserError("the model config needs num_actions (discrete actions) or action_dim (Box actions)")
        if self.action_dim and not self.action_low:
            raise UserError("the model config needs action_low and action_high (the bounds of the Box actions)")
        if not self.episode_length:
            raise UserError("the model config needs episode_length")
        if self.normalize_states and self.state_dim and len(self.state_mean) != self.state_dim:
            raise UserError("the model config needs state_mean and state_std (one per state dimension) with "
                            "normalize_states")

    @property
    def tokens_per_transition(self) -> int:
        """1 for the 'transition' layout, 3 for 'separate'."""
        return 1 if self.layout == "transition" else 3

    @property
    def max_tokens(self) -> int:
        """Most tokens the model ever attends over (a full window)."""
        return self.context * self.tokens_per_transition


def _check_state_statistics(config: ADConfig) -> None:
    """UserError unless --state-mean / --state-std come with --normalize-states and agree (as long as each other and
    --state-dim, finite, std > 0)."""
    pair = _paired_lists(config, "state_mean", "state_std", config.state_dim, "value per state dimension "
                         "(--state-dim")
    if pair is None:
        return
    if not config.normalize_states:
        raise UserError("--state-mean and --state-std are used only with --normalize-states; add "
                        "--normalize-states, or leave them out")
    mean, std = pair
    if not all(v > 0 for v in std):
        raise UserError(f"--state-mean and --state-std must be finite with every std > 0, got mean {mean}, std {std}")


def _check_box_actions(config: ADConfig) -> None:
    """UserError unless the Box-action options agree with each other (finite bounds, low < high, one per dim)."""
    refuse_choice(config, action_head=ACTION_HEADS)
    refuse(config, ("action_bins",), lambda v: v < 2, "must be at least 2")
    refuse(config, ("action_dim",), lambda v: v < 0, "must be >= 0")
    if config.num_actions and config.action_dim:
        raise UserError("set --num-actions (discrete actions) or --action-dim (Box actions), not both")
    pair = _paired_lists(config, "action_low", "action_high", config.action_dim, "bound per action dimension "
                         "(--action-dim")
    if pair is not None and not all(lo < hi for lo, hi in zip(*pair)):
        raise UserError(f"Box action bounds must be finite with low < high, got low {pair[0]}, high {pair[1]}")


def _paired_lists(config: ADConfig, first: str, second: str, dim: int, each: str) -> tuple[list, list] | None:
    """The two list options ``first`` and ``second`` (None if both are empty); UserError unless they are as long as
    each other and as ``dim`` (when set) and every value is finite. ``each`` names one entry for the message."""
    import math

    a, b = list(getattr(config, first)), list(getattr(config, second))
    if not a and not b:
        return None
    flags = f"--{first.replace('_', '-')} and --{second.replace('_', '-')}"
    if len(a) != len(b) or (dim and len(a) != dim):
        raise UserError(f"{flags} need one {each} {dim}), got {len(a)} and {len(b)}")
    if not all(math.isfinite(v) for v in a + b):
        raise UserError(f"{flags} must be finite, got {a} and {b}")
    return a, b


def model_config_of(config: Any, **overrides: Any) -> ADConfig:
    """The `ADConfig` part of a config holding (at least) ADConfig's fields."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(ADConfig)}
    values.update(overrides)
    return ADConfig(**values)


@dataclass
class TrainRLConfig(ADConfig, TrainingOptions, DistributedOptions, run_options("out", "seed", "threads", "progress")):
    """Train the AD transformer on an RL-format learning-history dataset (`ad train rl`)."""

    PRESETS = {
        # The field defaults: a small model that trains at useful speed on 2 CPU cores.
        "demo": {},
        # The AD paper's layout at full size: separate state / action / reward tokens, context 256, 22k steps
        # (a day or more on one CPU machine).
        "large": dict(layout="separate", batch_size=32, context=256, n_embd=64, n_layer=4, n_head=4,
                        n_ff=2048, attn_dropout=0.5, resid_dropout=0.1, embd_dropout=0.0, learning_rate=3e-4,
                        beta1=0.9, beta2=0.99, weight_decay=0.0, grad_clip=1.0, min_lr=2e-6,
                        warmup_steps=0, max_steps=22_000, action_weight=1.0, state_weight=0.0,
                        reward_weight=0.0, logprob_weight=0.0),
    }

    grid_size: int = option(-1, "embed discrete states as grid row + column (generalises to unseen cells): -1 = when "
                                 "the dataset's task_spec.size says the states are the cells of a square grid; "
                                 "0 = one embedding per state; n = an n x n grid")
    position_embedding: bool = override(ADConfig, "position_embedding", True)
    data: str = option("data/darkroom", "learning-history dataset folder or URL (file://, s3://, gs://, memory:// "
                                        "...), written by `ad generate ...`", runtime=True)
    out: str = override(RunOptions, "out", "runs/ad", "the run folder on the local disk (checkpoints/, tb/, "
                                                    "config.yaml, model/)")
    preset: Literal["demo", "large"] = option("demo", "named set of option values applied first: demo (small, minutes "
                                                     "on a CPU) or large (the AD paper's separate-token layout, "
                                                     "context 256, 22k steps)", runtime=True)
    objective: Literal["ad", "ed", "dpt"] = option(
        "ad", "what the action head learns: ad = the actions of whole learning histories (Algorithm Distillation); "
              "ed = those of each stream's last episodes only (expert distillation); dpt = the optimal action of "
              "every state given the context before it (Decision-Pretrained Transformer; the task family must "
              "provide optimal actions)")
    dpt_target: Literal["optimal", "posterior"] = option(
        "optimal", "DPT's target (--objective dpt only): optimal = the optimal action of the window's own task (the "
                   "DPT paper's); posterior = each action's probability of being optimal given the window's rows "
                   "before it, the task drawn from the family's task distribution (the expectation of the optimal "
                   "target over every task the window allows, so held-out tasks the training tasks leave out keep "
                   "their share; the task family must provide it)")
    expert_only: bool = option(False, "the same as --objective ed (the older spelling, kept for existing configs)")
    subsample: int = option(1, "train on every k-th episode of each stream (the AD paper's subsampling: the distilled "
                                   "history improves k times faster per episode than its source)")
    history_start_share: float = option(0.0, "share of training windows drawn from those that begin at a history's "
                                             "first transition (a stream's, after --subsample), whose every position "
                                             "has the whole history so far in context, as in the evaluation's first "
                                             "episodes; the rest are drawn from all windows alike. 0: all alike (the "
                                             "AD paper's sampling), where a window starting mid-history shows the "
                                             "source acting on episodes the window does not hold")
    init_from: str = option("", "start from the weights of a finished `ad train rl` run (its folder, holding model/) "
                                "instead of random ones, e.g. to fine-tune DPT on contexts of its own runs; the "
                                "model's options and the dataset's sizes must be that run's (dropout may differ); only "
                                "the weights carry over: the warm-up and learning-rate decay start afresh over "
                                "max_steps")
    compile: bool = option(False, "torch.compile the model (slow start, faster steps on some machines)", runtime=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_distributed_options(self, self.batch_size)
        if self.preset not in self.PRESETS:
            raise UserError(f"unknown preset {self.preset!r}; choose one of: {', '.join(sorted(self.PRESETS))}")
        refuse_choice(self, objective=OBJECTIVES, dpt_target=DPT_TARGETS)
        if self.dpt_target != "optimal" and self.objective != "dpt":
            raise UserError(f"--dpt-target {self.dpt_target} is DPT's target; pass --objective dpt with it, or drop it")
        if self.expert_only and self.objective == "dpt":
            raise UserError("--expert-only means --objective ed; drop it to train --objective dpt")
        if self.expert_only:
            self.objective = "ed"
        self.expert_only = self.objective == "ed"  # one meaning, recorded consistently in config.yaml
        refuse(self, ("subsample",), lambda v: v < 1, "must be at least 1")
        refuse(self, ("history_start_share",), lambda v: not 0.0 <= v <= 1.0, "must be between 0 and 1")
        from ad.config.memory import check_memory

        check_memory(training_memory_bytes(self), f"training with --batch-size {self.batch_size}, --context "
                     f"{self.context}, --n-layer {self.n_layer}, --n-embd {self.n_embd}, --n-ff {self.n_ff}",
                     "pass smaller values of these options")


# ---------------------------------------------------------------------------- rough training memory
# (the AD transformer's, so that absurd sizes are refused before anything is allocated)
#: Bytes per trained parameter: float32 weights, gradient and AdamW's two moments.
BYTES_PER_PARAMETER = 16


def parameter_count(config: Any) -> int:
    """Parameters of the blocks (attention, feed-forward, norms) and of the embeddings and heads the options fix
    (the dataset's state / action tables are left out: they are small next to absurd sizes)."""
    d, ff = config.n_embd, config.n_ff
    block = 4 * d * d + 2 * d * ff + 8 * d + ff
    tokens = config.context * (1 if config.layout == "transition" else 3)
    return config.n_layer * block + (tokens + config.num_states + config.num_actions + config.episode_length + 16) * d


def training_memory_bytes(config: Any) -> int:
    """Peak memory of one optimiser step: parameters, gradients and Adam moments, plus the float32 activations the
    backward pass keeps (residual stream, queries / keys / values, feed-forward hidden layer) twice over; attention
    weights are left out (fused attention), so this lower bound only refuses sizes no run could take."""
    tokens = config.context * (1 if config.layout == "transition" else 3)
    per_layer = tokens * (8 * config.n_embd + 2 * config.n_ff)
    activations = 2 * 4 * config.batch_size * config.n_layer * per_layer
    return BYTES_PER_PARAMETER * parameter_count(config) + activations

#: Options that may change when a run is resumed (its runtime options); everything else must match the saved config.
RESUMABLE_CHANGES = runtime_fields(TrainRLConfig)

