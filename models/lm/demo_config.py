"""`ad demo --model lm`: its options (`LMDemoConfig`) and where the Language-format demo differs in the demo pipeline
(:mod:`ad.demo`): its data is the RL-format demo's, its runs are `ad train lm` runs, each evaluated on its
own, and its report (`report-lm.md`) has the rows of both formats. Imports no torch (`ad --help` reads it); the
stages' code is in :mod:`models.lm.demo`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from ad.config import option, override, refuse, refuse_choice
from ad.demo import DEMO_TEMPERATURE, DemoConfig, DemoRun, eval_folder_name
from ad.config.groups import RunOptions, SamplingOptions, run_options

#: --lm choices: a Llama trained from scratch (word tokenizer), or the pretrained default + LoRA
LMS = ("scratch", "smollm2-135m")
#: Per DarkRoom source: the LM's context (transitions), subsampling, AD and ED steps when left at 0: explorer
#: histories whole with 5 episodes in context, every 40th A2C episode with 4 (docs/experiments/language-format.md).
SOURCE_DEFAULTS = {"explorer": {"context": 100, "subsample": 1, "ad_steps": 2000, "ed_steps": 500},
                   "a2c": {"context": 80, "subsample": 40, "ad_steps": 2000, "ed_steps": 1000}}
#: The pretrained LM's budget when left at 0, sized for 2 CPU cores: 2 episodes in context, 160 steps x 8 windows
#: (docs/experiments/language-format.md, `benchmarks/lm_pretraining.py`).
PRETRAINED_DEFAULTS = {"context": 40, "ad_steps": 160, "ed_steps": 80, "batch_size": 8}
#: The scratch LM's batch size when left at 0.
SCRATCH_BATCH_SIZE = 16


@dataclass
class LMDemoConfig(DemoConfig, SamplingOptions, run_options("out", "seed", "threads")):
    """Algorithm Distillation in the Language format on DarkRoom: the RL-format demo's histories as text, a causal
    LM trained on them, evaluated in context on the same held-out goals and seeds beside the RL-format AD."""

    #: the task family whose RL-format demo this one runs first and whose histories the LM is trained on (found
    #: through the registry: models/ import no task)
    FAMILY: ClassVar[str] = "darkroom"
    TITLE: ClassVar[str] = "DarkRoom, RL format and Language format"
    REPORT: ClassVar[str] = "report-lm.md"

    out: str = override(RunOptions, "out", "data/demo", "the folder of the RL-format demo (reused when present: "
                                                        "darkroom/, ad/, ed/, eval/) and of the LM runs lm-<name>/, "
                                                        "lm-<name>-ed/, eval-lm/, report-lm.md")
    lm: Literal["scratch", "smollm2-135m"] = option(
        "scratch", "the causal LM: scratch = a Llama-style LM built from a transformers config (`ad train lm "
                   "--preset scratch`: 4 blocks of width 128; the RL-format model has 2 of 64) on a word tokenizer, "
                   "all weights trained; smollm2-135m = the pretrained SmolLM2-135M-Instruct + LoRA (bfloat16 weights) "
                   "on the same grid text through its own tokenizer, at a CPU budget unless --ad-steps / --context / "
                   "--batch-size are given")
    source: Literal["explorer", "a2c"] = option(
        "explorer", "DarkRoom source whose histories both formats distil (`ad demo --source`): explorer (searches "
                    "the room systematically; the default) or a2c (the AD paper's source)")
    ad_steps: int = option(0, "optimiser steps of the LM trained on every --subsample-th episode (AD); 0 = the "
                              "source's default (2000; smollm2-135m: 160)", aliases=("steps",))
    ed_steps: int = option(0, "optimiser steps of the LM trained on expert episodes only (this format's ED); 0 = the "
                              "source's default (explorer 500, a2c 1000; smollm2-135m: 80)")
    batch_size: int = option(0, "windows per optimiser step; 0 = the LM's default (scratch 16, smollm2-135m 8)")
    learning_rate: float = option(1e-3, "peak learning rate (--lm smollm2-135m: of the LoRA adapters)",
                                  aliases=("lr",))
    context: int = option(0, "transitions per LM training window and most kept when acting; 0 = the source's "
                             "default (explorer 100 = 5 episodes, a2c 80; smollm2-135m: 40)")
    rl_context: int = option(0, "context of the RL-format AD; 0 = --context for the scratch LM (both formats read the "
                                "same windows), the source's default for smollm2-135m")
    subsample: int = option(0, "train on every k-th episode of each history (both formats); 0 = the source's "
                               "default (explorer 1, a2c 40)")
    watch_every: int = option(1000, "held-out in-context return during training every this many steps (0: never)")
    episodes: int = option(100, "episodes in context at evaluation")
    seeds: int = option(3, "evaluation seeds per held-out goal (the RL demo's)")
    temperature: float = override(SamplingOptions, "temperature", 1.0,
                                  f"{DEMO_TEMPERATURE}; the RL-format rows are evaluated at the same temperature")
    threads: int = override(RunOptions, "threads", 0, "those of the LM stages; the RL-format demo keeps its own "
                                                      "default (1) unless this is set")
    train_overrides: dict = option({}, "extra `ad train lm` options for both LM runs, e.g. {n_layer: 2} "
                                       "(YAML/JSON config only)")
    skip_rl: bool = option(False, "do not run the RL-format demo (the LM still needs <out>/darkroom; the report "
                                  "then has no RL-format rows unless its evaluation, <out>/eval/eval.json, exists)")

    def __post_init__(self) -> None:
        refuse_choice(self, source=SOURCE_DEFAULTS, lm=LMS)
        source_context = SOURCE_DEFAULTS[self.source]["context"]
        defaults = {**SOURCE_DEFAULTS[self.source], "batch_size": SCRATCH_BATCH_SIZE}
        if self.lm != "scratch":
            defaults.update(PRETRAINED_DEFAULTS)
        for name, value in defaults.items():
            if getattr(self, name) == 0:
                setattr(self, name, value)
        if self.rl_context == 0:
            self.rl_context = self.context if self.lm == "scratch" else source_context
        refuse(self, ("ad_steps", "ed_steps", "batch_size", "context", "rl_context", "subsample", "episodes", "seeds"),
               lambda v: v < 1, "must be at least 1")
        refuse(self, ("learning_rate",), lambda v: not 0 < v < 1, "must be a finite number in (0, 1)")  # NaN too
        refuse(self, ("watch_every", "threads"), lambda v: v < 0, "must be >= 0")
        self.check_temperature()

    def check_data(self) -> None:
        """Nothing to check here: stage 1 is the RL-format demo, which checks its own options when it runs."""

    def make_data(self, timings: dict[str, float]) -> None:
        """The RL-format demo (:func:`models.lm.demo.rl_demo_config`): the histories, the RL-format AD and ED and
        their evaluation; skipped with ``--skip-rl`` or where its evaluation exists. At a temperature other than 1,
        where the RL-format demo has finished (``<out>/eval/eval.json``), only its models are evaluated again at that
        temperature (:func:`models.lm.demo.evaluate_rl_rows`)."""
        from ad import registry
        from ad.demo import stage
        from models.lm.demo import evaluate_rl_rows, rl_demo_config

        if self.skip_rl or (self.eval_folder() / "eval.json").is_file():
            return
        if self.temperature != 1.0 and (Path(self.out) / eval_folder_name() / "eval.json").is_file():
            stage(f"evaluate the RL-format models at temperature {self.temperature:g}", timings, evaluate_rl_rows,
                  self)
            return
        rl = registry.get_demo(self.FAMILY, "rl")
        stage(f"RL-format demo (ad demo --task {self.FAMILY} --model rl)", timings, rl.run, rl_demo_config(self))

    def train_runs(self) -> list[DemoRun]:
        """``ad train lm`` of the LM on every ``--subsample``-th episode (AD) and on expert episodes only (ED)."""
        from models.lm.demo import lm_runs

        return lm_runs(self)

    def evaluate(self, folders: dict[str, Path]) -> dict[str, Any]:
        """Every LM run in ``out`` in context on the RL-format demo's held-out goals and seeds, each into
        ``eval-lm/<run>`` of :meth:`results_folder` (``out`` at temperature 1, else ``<out>/eval-temperature-<T>``);
        one summary with the rows of both formats."""
        from models.lm.demo import evaluate_lms

        return evaluate_lms(self)

    def report(self, summary: dict[str, Any], timings: dict[str, float], methods: list[str]) -> Path:
        """``report-lm.md`` with one table and one plot (``eval-lm/in_context.png``) of both formats, in ``out`` (at
        another temperature in ``<out>/eval-temperature-<T>``)."""
        from models.lm.demo import write_lm_report

        return write_lm_report(self, summary, timings)
