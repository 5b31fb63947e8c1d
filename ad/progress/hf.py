"""Plain progress lines for a Hugging Face ``Trainer`` (trl's GRPO / CPO trainers) when output goes to a log.

On a terminal the Trainer's own tqdm bar is fine; in a file or pipe it is a wall of carriage returns, so
:func:`trainer_progress` turns it off and prints ``GRPO: step 40/80 reward 0.61 loss 0.012 0.21 step/s eta 3m10s``
every ``$AD_PROGRESS_SECONDS`` seconds instead (through the public ``TrainerCallback`` API).
"""
from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from ad.progress import PlainProgress, interactive


class PlainProgressCallback(TrainerCallback):
    """Prints :class:`ad.progress.PlainProgress` lines over the Trainer's optimiser steps, with the logged
    metrics named in ``metrics`` (the last value of each) on every line."""

    def __init__(self, desc: str, metrics: tuple[str, ...] = ("reward", "loss")) -> None:
        self.desc, self.metrics, self.bar = desc, metrics, None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.bar = PlainProgress(state.max_steps or args.max_steps, self.desc, unit="step",
                                 initial=state.global_step)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None,
               **kwargs: Any) -> None:
        if self.bar is not None and logs:
            shown = {k: v for k, v in logs.items() if k in self.metrics}
            if shown:
                self.bar.set_postfix(**shown)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.set(state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close(done=state.global_step >= state.max_steps)
            self.bar = None


def library_bars_off_in_logs() -> None:
    """Turn off transformers' and datasets' own tqdm bars (weight loading, map) unless stdout is a terminal:
    in a log they are carriage-return noise."""
    if interactive():
        return
    import datasets
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()


def trainer_progress(show: bool, desc: str) -> tuple[bool, list[Any]]:
    """(``disable_tqdm`` for the Trainer's arguments, callbacks to add) for a run that shows progress iff
    ``show``: the tqdm bar on a terminal, plain lines elsewhere, nothing when not ``show``."""
    if not show:
        return True, []
    if interactive():
        return False, []
    return True, [PlainProgressCallback(desc)]
