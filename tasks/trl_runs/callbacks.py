"""The trainer callback that commits a chunk's rows right after the trainer saved the chunk's checkpoint."""
from __future__ import annotations

import math
from typing import Any, Callable

from transformers import TrainerCallback

from tasks.trl_runs.rollout_log import ChunkLog


class ChunkCallback(TrainerCallback):
    """Forces a checkpoint every ``chunk_steps`` iterations and at the end, then commits that chunk's rows (in that
    order: a crash in between leaves a checkpoint newer than the last unit, which
    :func:`tasks.trl_runs.checkpoints.resume_point` ignores)."""

    def __init__(self, log: ChunkLog, chunk_steps: int, on_commit: Callable[[int, int], None]) -> None:
        self.log, self.chunk_steps, self.on_commit = log, chunk_steps, on_commit

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.chunk_steps == 0 or state.global_step >= state.max_steps:
            control.should_save = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = int(state.global_step)
        chunk = math.ceil(step / self.chunk_steps) - 1
        rows = self.log.commit(chunk, {"updates": [chunk * self.chunk_steps, step], "checkpoint": f"checkpoint-{step}"})
        self.on_commit(chunk, rows)
        return control
