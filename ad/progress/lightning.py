"""The progress bar of `ad train`: optimiser steps out of ``max_steps`` (Lightning's own counts epochs, which these
step-bounded runs do not have: it shows "Epoch 4/-2"), as a bar on a terminal and as plain lines in a log
(:mod:`ad.progress`), plus one line per validation with its ``val/*`` metrics."""
from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar

from ad.progress import close_bar, format_value, progress_bar


class StepProgressBar(ProgressBar):
    """Steps ``global_step / max_steps`` with the progress-bar metrics (``self.log(..., prog_bar=True)``)."""

    def __init__(self) -> None:
        super().__init__()
        self._enabled = True
        self._bar: Any = None

    # Lightning turns the bar off on ranks other than 0 and around tuner runs.
    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    def print(self, *args: Any, sep: str = " ", **kwargs: Any) -> None:
        if self._bar is not None:
            self._bar.write(sep.join(map(str, args)))
        else:
            print(*args, sep=sep, **kwargs)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if not self._enabled:
            return
        total = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None
        self._bar = progress_bar(total, desc="", unit="step", initial=trainer.global_step)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._bar is None:
            return
        metrics = {k: v for k, v in self.get_metrics(trainer, pl_module).items() if k != "v_num"}
        self._bar.set_postfix({k: format_value(v) for k, v in metrics.items()}, refresh=False)
        self._bar.update(trainer.global_step - self._bar.n)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self._bar is None or trainer.sanity_checking:
            return
        metrics = {k[4:]: v for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        if metrics:
            names = sorted(metrics, key=lambda k: (k != "loss", k))  # the loss first
            values = " ".join(f"{k} {format_value(metrics[k])}" for k in names)
            self._bar.write(f"validation at step {trainer.global_step}: {values}")

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._close(done=True)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._close(done=False)

    def _close(self, done: bool) -> None:
        close_bar(self._bar, done)
        self._bar = None
