"""Option groups shared by several commands, each declared once.

A command's config inherits the groups it takes (``class TrainLMConfig(LoRAOptions, TrainingOptions, ...)``) and
changes a default with :func:`ad.config.override`; its run options come from :func:`run_options`. Importing this
module imports no torch.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import sys
from dataclasses import dataclass
from typing import Any, Literal

from ad.config import option, override, refuse, refuse_choice
from ad.errors import UserError

#: The ``--help`` sections of the run options, the training options and the LoRA options.
RUN_GROUP = "run"
TRAINING_GROUP = "training"
LORA_GROUP = "LoRA adapter settings"


@dataclass
class RunOptions:
    """The run options every command shares, declared once: a command inherits the ones it uses through
    :func:`run_options` and sets its own defaults with :func:`ad.config.override`."""

    out: str = option("data/out", "where the command writes", group=RUN_GROUP, runtime=True)
    seed: int = option(0, "seed of every random draw of the run", group=RUN_GROUP)
    threads: int = option(0, "torch CPU threads (0: torch's default)", group=RUN_GROUP, runtime=True)
    progress: bool = option(True, "show progress (a bar on a terminal, periodic lines in a log)", group=RUN_GROUP,
                            runtime=True)
    tensorboard: bool = option(True, "write TensorBoard scalars under the run folder's tb/", group=RUN_GROUP,
                               runtime=True)
    plots: bool = option(True, "save pictures of the run (learning curves, PNG) in the run folder", group=RUN_GROUP,
                         runtime=True)


def run_options(*names: str) -> type:
    """The option group of the :class:`RunOptions` ``names`` (``class GenerateConfig(run_options("out", "seed",
    "progress"))``): a command takes only the run options it uses, so one that writes no TensorBoard scalars has no
    ``--tensorboard``. The same names, in any order, give the same class."""
    fields = [f.name for f in dataclasses.fields(RunOptions)]
    unknown = [name for name in names if name not in fields]
    if unknown or not names:
        raise TypeError(f"run_options takes names of RunOptions fields ({', '.join(fields)}), got {names}")
    return _run_group(tuple(name for name in fields if name in names))


def dataset_out(default: str) -> Any:
    """The ``out`` option of a command that writes a learning-history dataset, with its default folder."""
    return override(RunOptions, "out", default, "the dataset folder or URL (file://, s3://, memory:// ...); "
                                                "re-running the same command resumes")


@functools.cache
def _run_group(names: tuple[str, ...]) -> type:
    fields = {f.name: f for f in dataclasses.fields(RunOptions)}
    group = dataclasses.make_dataclass(
        "RunOptions", [(n, fields[n].type, override(RunOptions, n, fields[n].default)) for n in names],
        namespace={"__post_init__": _check_run_options, "__doc__": RunOptions.__doc__})
    group.__module__ = __name__
    group.__qualname__ = f"run_options({', '.join(map(repr, names))})"
    return group


def _check_run_options(self: Any) -> None:
    """Refuse negative ``--threads``, then continue the ``__post_init__`` chain."""
    if getattr(self, "threads", 0) < 0:
        raise UserError(f"--threads must be >= 0, got {self.threads}")
    for base in type(self).__mro__:
        if base.__dict__.get("__post_init__") is _check_run_options:
            continue_post_init(base, self)
            return


def continue_post_init(cls: type, self: object) -> None:
    """Continue the ``__post_init__`` chain of a config that combines several option groups."""
    parent = getattr(super(cls, self), "__post_init__", None)
    if parent is not None:
        parent()


@dataclass
class SamplingOptions:
    """How evaluated policies sample their actions (``ad eval`` and the demos that evaluate with it)."""

    temperature: float = option(1.0, "sampling temperature T: actions are drawn from the policy's probabilities "
                                     "raised to 1/T and renormalised (T < 1: nearer the greedy action, T > 1: more "
                                     "random; a Gaussian action head's std is multiplied by T); 1 = as trained")

    def check_temperature(self) -> None:
        """A UserError unless ``temperature`` is finite and positive."""
        refuse(self, ("temperature",), lambda v: not math.isfinite(v) or v <= 0,
               "must be a finite number > 0 (greedy acting is the limit T -> 0)")


@dataclass
class SamplingRuleOptions:
    """When sampled actions are drawn (``ad eval`` and the demos of the RL-format models, whose policies support
    both rules)."""

    sampling: Literal["step", "episode"] = option(
        "step", "how sampled actions are drawn: step = afresh at every step; episode = one uniform draw per env and "
                "episode picks each of the episode's actions where it falls in the policy's probabilities summed in "
                "the task family's action order, so a policy whose probabilities mix hypotheses (DPT: the optimal "
                "action wherever the goal may be) follows one of them for the whole episode: posterior sampling "
                "(Box actions: one draw per dimension)")


@dataclass
class LoRAOptions:
    """LoRA adapter settings (peft ``LoraConfig``); the base model's weights stay frozen."""

    lora_r: int = option(16, "LoRA rank", group=LORA_GROUP)
    lora_alpha: float = option(32.0, "LoRA scaling numerator (the update is scaled by alpha / r)", group=LORA_GROUP)
    lora_dropout: float = option(0.0, "dropout on the LoRA branch input", group=LORA_GROUP)
    target_modules: list[str] = option(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                        "down_proj"],
                                       "names of the linear layers that get adapters ('all-linear' = every "
                                       "linear layer but the LM head)", group=LORA_GROUP)

    def __post_init__(self) -> None:
        refuse(self, ("lora_r",), lambda v: v < 1, "must be at least 1")
        refuse(self, ("lora_alpha",), lambda v: v <= 0, "must be positive")
        refuse(self, ("lora_dropout",), lambda v: not 0.0 <= v < 1.0, "must be in [0, 1)")
        if not self.target_modules:
            raise UserError("--target-modules must name at least one layer (e.g. q_proj v_proj, or all-linear)")
        continue_post_init(LoRAOptions, self)

    def lora_dict(self) -> dict:
        """The four LoRA options as a plain dict (what ``models.lm.module.add_lora`` takes)."""
        return {"lora_r": self.lora_r, "lora_alpha": self.lora_alpha, "lora_dropout": self.lora_dropout,
                "target_modules": list(self.target_modules)}


def peft_lora_config(lora: dict) -> Any:
    """A peft ``LoraConfig`` for a causal LM from the :class:`LoRAOptions` fields (``lora_dict()``)."""
    from peft import LoraConfig

    targets = list(lora["target_modules"])
    return LoraConfig(r=int(lora["lora_r"]), lora_alpha=float(lora["lora_alpha"]),
                      lora_dropout=float(lora["lora_dropout"]),
                      target_modules="all-linear" if targets == ["all-linear"] else targets, task_type="CAUSAL_LM")


#: The training precisions :class:`TrainingOptions` accepts (Lightning's names).
TRAINING_PRECISIONS = ("32-true", "bf16-mixed")
#: The precisions :class:`WeightsDtypeOptions` accepts.
WEIGHT_DTYPES = ("float32", "bfloat16")
_CPUINFO = "/proc/cpuinfo"


def cpu_has_fast_bfloat16(cpuinfo: str = _CPUINFO) -> bool | None:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AMX or AVX512-BF16 in its flags); None where it
    cannot tell (no ``/proc/cpuinfo``). Without them torch emulates bfloat16 products: on a 2-core AMD EPYC (AVX2,
    2026-11-26) a (800 x 576) @ (576 x 576) product ran 8x slower in bfloat16 than in float32."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return None
    return None if not flags else bool({"amx_bf16", "avx512_bf16"} & set(flags))


def bfloat16_slowdown(size: int = 256, width: int = 576, repeats: int = 3) -> float:
    """How many times slower a (size x width) @ (width x width) product runs in bfloat16 than in float32 on this
    CPU, measured now (fastest of ``repeats``; about a tenth of a second where bfloat16 is emulated)."""
    import time

    import torch

    def fastest(dtype: Any) -> float:
        a, b = torch.randn(size, width, dtype=dtype), torch.randn(width, width, dtype=dtype)
        a @ b  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        return min(times)

    return fastest(torch.bfloat16) / max(fastest(torch.float32), 1e-9)


def warn_if_bfloat16_is_emulated(chosen: str, faster: str) -> None:
    """A warning on stderr that ``chosen`` (e.g. ``--dtype bfloat16``) is slow here, naming ``faster``, where there
    is no GPU and the CPU lacks bfloat16 hardware (the slowdown measured now)."""
    if cpu_has_fast_bfloat16() is False and not _cuda_available():
        print(f"warning: {chosen} on a CPU without AMX or AVX512-BF16: torch emulates bfloat16 matrix products here "
              f"(one measured {bfloat16_slowdown():.1f}x slower than in float32 just now); {faster} is the faster "
              "choice on this machine", file=sys.stderr)


def _cuda_available() -> bool:
    """Whether torch sees a GPU (imports torch: call it only when the answer matters)."""
    import torch

    return bool(torch.cuda.is_available())


@dataclass
class WeightsDtypeOptions:
    """The precision a pretrained LM's weights are loaded in (``ad.lm.pretrained.load_base``)."""

    dtype: Literal["float32", "bfloat16"] = option(
        "float32", "weights of the LM: float32, or bfloat16 (faster on GPUs and on CPUs with AMX / AVX512-BF16; "
                   "emulated and slower elsewhere, with a warning). LoRA adapters and value heads stay float32; "
                   "log-probabilities then carry bfloat16 rounding")

    def __post_init__(self) -> None:
        refuse_choice(self, dtype=WEIGHT_DTYPES)
        if self.dtype == "bfloat16":
            warn_if_bfloat16_is_emulated("--dtype bfloat16", "--dtype float32")
        continue_post_init(WeightsDtypeOptions, self)


@dataclass
class TrainingOptions:
    """The optimiser (AdamW, linear warm-up, cosine decay), the step budget and the run loop of `ad train`."""

    resume: bool = option(False, "continue the run in --out from its last checkpoint (same options). The model, "
                                 "optimiser, schedule and step count are restored, but not the random draw of "
                                 "training windows, so a resumed run is statistically equivalent to an "
                                 "uninterrupted one, not bit-identical", runtime=True, group=TRAINING_GROUP)
    max_steps: int = option(3000, "optimiser steps in total (a resumed run continues up to this count)", runtime=True,
                            group=TRAINING_GROUP)
    batch_size: int = option(32, "windows per optimiser step, over all processes (each of devices x num_nodes "
                                 "processes trains on its share of the same global batch)", group=TRAINING_GROUP)
    learning_rate: float = option(1e-3, "peak learning rate (AdamW; trained weights only)", aliases=("lr",),
                                  group=TRAINING_GROUP)
    min_lr: float = option(1e-5, "learning rate floor at the end of the cosine decay", group=TRAINING_GROUP)
    warmup_steps: int = option(100, "linear learning-rate warm-up steps", group=TRAINING_GROUP)
    decay_steps: int = option(0, "step at which the cosine decay reaches min_lr (0: max_steps)", group=TRAINING_GROUP)
    weight_decay: float = option(0.01, "AdamW weight decay on weight matrices (not on biases, norms, embeddings)",
                                 group=TRAINING_GROUP)
    beta1: float = option(0.9, "AdamW beta1", group=TRAINING_GROUP)
    beta2: float = option(0.99, "AdamW beta2", group=TRAINING_GROUP)
    grad_clip: float = option(1.0, "clip the gradient norm to this value (0: no clipping)", group=TRAINING_GROUP)
    val_every: int = option(250, "held-out validation every this many steps (0: never)", runtime=True,
                            group=TRAINING_GROUP)
    val_batches: int = option(8, "held-out batches per validation", runtime=True, group=TRAINING_GROUP)
    log_every: int = option(25, "log training metrics every this many steps", runtime=True, group=TRAINING_GROUP)
    checkpoint_every: int = option(250, "write checkpoints/last.ckpt every this many steps", runtime=True,
                                   group=TRAINING_GROUP)
    num_workers: int = option(0, "data-loader worker processes", runtime=True, group=TRAINING_GROUP)
    allow_incomplete: bool = option(False, "train on a dataset whose generation did not finish (fewer tasks than its "
                                           "command planned; refused without it)", runtime=True, group=TRAINING_GROUP)
    precision: Literal["32-true", "bf16-mixed"] = option(
        "32-true", "arithmetic of training (Lightning's Trainer precision): 32-true = float32 throughout; bf16-mixed "
                   "= float32 weights and optimiser, the layers' matrix products in bfloat16 (torch.autocast): faster "
                   "on GPUs and on CPUs with AMX / AVX512-BF16, emulated and slower elsewhere (with a warning); the "
                   "loss then carries bfloat16 rounding", runtime=True, group=TRAINING_GROUP)

    def __post_init__(self) -> None:
        refuse(self, ("max_steps", "batch_size", "log_every", "checkpoint_every", "val_batches"), lambda v: v < 1,
               "must be at least 1")
        refuse(self, ("warmup_steps", "decay_steps", "val_every", "num_workers"), lambda v: v < 0, "must be >= 0")
        if not 0 < self.learning_rate or not 0 <= self.min_lr <= self.learning_rate:
            raise UserError(f"need 0 < --learning-rate and 0 <= --min-lr <= --learning-rate, got --learning-rate "
                            f"{self.learning_rate}, --min-lr {self.min_lr}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise UserError(f"--beta1 and --beta2 must be in [0, 1), got {self.beta1}, {self.beta2}")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise UserError("--weight-decay and --grad-clip must be >= 0")
        refuse_choice(self, precision=TRAINING_PRECISIONS)
        if self.precision == "bf16-mixed":
            warn_if_bfloat16_is_emulated("--precision bf16-mixed", "--precision 32-true")
        continue_post_init(TrainingOptions, self)
