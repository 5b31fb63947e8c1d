"""Options of ``ad generate keydoor`` (no torch): the grid engine's (:class:`tasks.grid.family.GridOptions`) plus the
task draw, with Key-to-Door's defaults.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, override, refuse
from ad.errors import UserError
from ad.config.groups import RunOptions
from tasks.grid.family import GridOptions, check_batches
from tasks.grid.room import check_size
from tasks.keydoor.pairs import draw_pairs, steps_needed, task_name

@dataclass
class GenerateConfig(GridOptions):
    """Train one A2C agent per Key-to-Door task (key/door pair; all tasks batched), or run the noisy demonstrator on
    every task, and record their histories."""

    out: str = override(GridOptions, "out", "data/keydoor")
    seed: int = override(RunOptions, "seed", 0, "the drawn pairs, the agents' initial weights and actions and the "
                                                "train/held-out split; recorded as run")
    tasks: int = option(400, "key/door pairs to train, drawn without replacement (seeded by --seed) from the "
                             "size^2 * (size^2 - 1) ordered pairs of distinct cells; 0 = all")
    pairs: list[str] = option([], "train these pairs instead of drawing --tasks: 'key_row,key_col/door_row,door_col' "
                                  "items or task names (keydoor9-k1-2-d7-7)")
    steps_per_task: int = option(400_000, "env steps per task (over its parallel envs); rounded up to whole updates")
    heldout_fraction: float = override(GridOptions, "heldout_fraction", 0.1)
    episode_length: int = override(GridOptions, "episode_length", 50)
    source: Literal["a2c", "explorer", "noise", "random"] = option(
        "a2c", "source algorithm: a2c (one A2C agent per task), explorer (walks to the nearest cell it has not "
               "searched until it finds the key, then the same for the door, remembering both across episodes), "
               "noise (noise distillation: a demonstrator walking a shortest path to the key, then the door, made "
               "epsilon-greedy, epsilon falling over each history) or random (each stream acts from its own drawn "
               "action distribution, the DPT paper's contexts). Explorer, noise and random write --num-envs streams "
               "of steps-per-task / (num-envs * episode-length) episodes")
    learning_rate: float = override(GridOptions, "learning_rate", 1e-3)
    tensorboard: bool = override(GridOptions, "tensorboard", False)

    #: The grid engine reads these fields; Key-to-Door has no presets and always ends at the door.
    preset = "keydoor"
    terminate_on_goal = True

    def __post_init__(self) -> None:
        check_size(self.size, "Key-to-Door")
        refuse(self, ("steps_per_task",), lambda v: v <= 0, "must be positive")
        refuse(self, ("tasks",), lambda v: v < 0, "must be >= 0")
        super().__post_init__()
        if isinstance(self.pairs, str):
            self.pairs = [self.pairs]
        exist = self.size ** 2 * (self.size ** 2 - 1)
        if self.tasks > exist and not self.pairs:
            raise UserError(f"--tasks {self.tasks}: a {self.size}x{self.size} room has only {exist} key/door pairs; "
                            f"pass --tasks {exist} or less (0 = all of them) or a larger --size")
        pairs = self.task_pairs()  # raises UserError for a bad pair
        need = {p: steps_needed(self.size, p, self.random_start) for p in pairs}
        longest = max(need, key=need.get)
        if self.episode_length < need[longest]:
            start = "the farthest start cell (--random-start)" if self.random_start else "the start cell"
            raise UserError(f"--episode-length {self.episode_length} is too short: task "
                            f"{task_name(self.size, longest)} needs {need[longest]} steps from {start} to its key "
                            f"and then its door, so no episode could finish it; pass --episode-length "
                            f"{need[longest]} or more")
        check_batches(self, len(pairs), 2, "tasks", "--tasks")  # (cell, key carried) tables

    def task_pairs(self) -> list[tuple[int, int, int, int]]:
        """The (key row, key col, door row, door col) of every task of this run, in order."""
        return draw_pairs(self.size, self.tasks, self.seed, self.pairs)

    @property
    def updates(self) -> int:
        """Optimiser steps per task: ceil(steps_per_task / (num_envs * num_steps))."""
        return -(-self.steps_per_task // (self.num_envs * self.num_steps))
