"""``ad demo`` (``--task darkroom``, the default): Algorithm Distillation on DarkRoom end to end (the pipeline:
:mod:`ad.demo`), from the nearest-unvisited explorer's histories (the default) or the AD paper's A2C. Options left
at 0 (``--streams``, ``--steps-per-goal``, ``--subsample``, ``--context``, ``--ad-steps``) take the source's
measured default (:data:`SOURCE_DEFAULTS`, :func:`explorer_streams`, docs/experiments/darkroom.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ad.config import option, override, refuse
from ad.demo import ADDemoConfig
from ad.errors import UserError
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.goals import all_goals
from tasks.grid.family import GridOptions
from tasks.grid.room import check_size, split_goals

#: Per source: env steps per history (stream), subsample, context (transitions), AD steps: the explorer's
#: histories whole with 10 episodes in context, every 40th A2C episode with 4 (docs/experiments/darkroom.md). The
#: explorer's steps are 60 episodes of the default length; with another ``--episode-length``, 60 of that length.
SOURCE_DEFAULTS = {"explorer": {"steps_per_stream": 1_200, "subsample": 1, "context": 200, "ad_steps": 4000},
                   "a2c": {"steps_per_stream": 24_000, "subsample": 40, "context": 80, "ad_steps": 5000}}
#: Episode length and histories (streams) per goal of the demo's histories (`ad generate darkroom` defaults).
EPISODE_LENGTH, STREAMS = GenerateConfig.episode_length, GenerateConfig.num_envs
#: The explorer's histories per goal where a room has fewer than FEW_GOALS training goals (5x5: 18), so that AD
#: reads the goal from the rewards in context instead of tying it to the few cells it saw rewarded.
FEW_GOALS, FEW_GOALS_STREAMS = 30, 30


def explorer_streams(size: int) -> int:
    """Histories per goal of the explorer source in a ``size`` x ``size`` room: 10, or 30 where the room has fewer
    than 30 training goals (the demo's held-out fraction of the ``size**2 - 1`` goals removed)."""
    train, _ = split_goals(all_goals(size), GenerateConfig.heldout_fraction, 0)
    return FEW_GOALS_STREAMS if len(train) < FEW_GOALS else STREAMS


#: Fraction of each stream's episodes that ``ad train rl --expert-only`` keeps (the ED baseline's data).
EXPERT_FRACTION = 0.1


@dataclass
class DarkRoomDemoConfig(ADDemoConfig):
    """Algorithm Distillation on DarkRoom end to end (generate -> train AD and ED -> evaluate -> report)."""

    FAMILY = "darkroom"
    TITLE = "DarkRoom"

    subsample: int = option(0, "AD trains on every k-th episode of each history (the AD paper's subsampling); 0 = the "
                               "source's default (explorer 1, a2c 40)")
    context: int = option(0, "transformer context in transitions; 0 = the source's default (explorer 200 = 10 "
                             "episodes, a2c 80)")
    ad_steps: int = option(0, "optimiser steps for AD; 0 = the source's default (explorer 4000, a2c 5000)")
    size: int = option(9, "DarkRoom side length")
    source: Literal["explorer", "a2c"] = option(
        "explorer", "source algorithm whose histories AD distils: explorer (walks to the nearest cell it has never "
                    "visited until it finds the goal, then to the goal) or a2c (the AD paper's source)")
    streams: int = option(0, "source histories (streams) per goal; 0 = the source's default (explorer: 10, or 30 in "
                             "rooms with fewer than 30 training goals, e.g. 5x5, where AD needs more histories per "
                             "goal to generalise; a2c: 10)")
    steps_per_goal: int = option(0, "env steps per goal over all its streams; 0 = the source's default (explorer "
                                    "streams x 60 episodes, 12,000 for 10 streams of 20-step episodes; a2c "
                                    "240,000)")
    episode_length: int = override(GridOptions, "episode_length", EPISODE_LENGTH,
                                   "in the histories and in the evaluation. 20 is the AD paper's Dark Room, 100 the "
                                   "DPT paper's DarkRoom")
    generate_preset: str = option("fast", "A2C preset of `ad generate darkroom` (--source a2c)")
    ent_coef: float = option(0.05, "entropy bonus of the source A2C (`ad generate ... --ent-coef`, whose own default "
                                   "is 0.01); each demo has its own default")
    terminate_on_goal: bool = option(False, "end episodes at the goal (the `ad generate darkroom` default) instead "
                                            "of rewarding every step spent there (the AD paper's Dark Room)")

    def __post_init__(self) -> None:
        check_size(self.size)
        refuse(self, ("streams",), lambda v: v < 0, "must be at least 1 (0: the source's default)")
        refuse(self, ("episode_length",), lambda v: v < 1, "must be at least 1")
        defaults = dict(SOURCE_DEFAULTS.get(self.source, SOURCE_DEFAULTS["a2c"]))
        if self.streams == 0:
            self.streams = explorer_streams(self.size) if self.source == "explorer" else STREAMS
        per_stream = defaults.pop("steps_per_stream")
        if self.source == "explorer":  # the same 60 episodes a history, whatever their length
            per_stream = per_stream // EPISODE_LENGTH * self.episode_length
        defaults["steps_per_goal"] = per_stream * self.streams
        for name, value in defaults.items():
            if getattr(self, name) == 0:
                setattr(self, name, value)
        super().__post_init__()

    def family_dropout(self) -> float:
        """A2C: 0.1 up to 7x7 (18 / 36 training goals: without it AD heads for the training goals on held-out ones), 0
        above (it cost 0.17 at 11x11); explorer: 0. Measured in docs/experiments/darkroom.md."""
        return 0.1 if self.source == "a2c" and self.size <= 7 else 0.0

    def runs(self) -> list[tuple[str, dict[str, Any]]]:
        """AD and ED; ED's context is cut to the expert part of a stream where that is shorter (the explorer's 60
        episodes leave 6 expert ones, 120 transitions)."""
        episodes = max(1, self.steps_per_goal // (self.streams * self.episode_length))
        expert = max(1, round(episodes * EXPERT_FRACTION)) * self.episode_length
        runs = super().runs()
        if expert < self.context:
            runs = [(label, {**extra, "context": expert} if extra.get("objective") == "ed" else extra)
                    for label, extra in runs]
        return runs

    def transition_context_options(self) -> dict[str, Any]:
        """DPT's independent transitions (``--dpt-data transitions``): one-step episodes, each from a uniformly drawn
        cell with a uniformly drawn action (the DPT paper's DarkRoom contexts); each stream (``steps_per_goal /
        streams`` of them) must fill a context window."""
        if self.steps_per_goal // self.streams < self.context:
            raise UserError(f"--dpt-data transitions: each of the {self.streams} streams of a goal holds "
                            f"{self.steps_per_goal // self.streams} transitions (--steps-per-goal "
                            f"{self.steps_per_goal} / --streams), fewer than the --context of {self.context}; pass "
                            f"--steps-per-goal {self.streams * self.context} or more, or a smaller --context")
        return {"random_start": True, "episode_length": 1, "random_policy": "uniform"}

    def generate_options(self) -> dict[str, Any]:
        options = {"size": self.size, "seed": self.seed, "steps_per_goal": self.steps_per_goal, "source": self.source,
                   "num_envs": self.streams, "episode_length": self.episode_length,
                   "terminate_on_goal": self.terminate_on_goal, "threads": self.threads}
        if self.source == "a2c":
            options.update(preset=self.generate_preset, ent_coef=self.ent_coef)
        return options
