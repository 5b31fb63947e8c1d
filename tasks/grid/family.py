"""What a grid family is to the grid sources (:class:`GridFamily`, one configuration of the engine), and what
every grid dataset shares: its columns (:func:`history_spec`), its metadata's split and task table
(:func:`grid_metadata`) and its learning figure (:func:`ratio_summary`). No torch: the explorer and noise sources
read it without loading the A2C.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ad.history import ColumnSpec, HistorySpec
from tasks.grid.room import NUM_ACTIONS, split_goals

#: Fraction of each stream, at its end, over which the learning figure is measured.
FINAL_FRACTION = 0.05
#: A goal counts as learned when its final mean return reaches this fraction of the optimum.
LEARNED_RATIO = 0.9
#: Why a summary's mean ratio is null (summary.json is strict JSON: no NaN).
NO_RATIO = ("no task has a ratio: none finished an episode in the last {:.0%} of its stream, or its optimal return "
            "is 0; raise --steps-per-task or --episode-length")

Goal = tuple[int, ...]
Columns = dict[str, np.ndarray]


@dataclass(frozen=True)
class GridFamily:
    """A grid family as the grid sources see it: one configuration of the engine (DarkRoom's is
    :data:`tasks.darkroom.generate.DARKROOM`, Key-to-Door's :data:`tasks.keydoor.generate.KEYDOOR`).

    A family's tasks are tuples of ints ("goals": a DarkRoom goal cell, a Key-to-Door key + door). Its agents and
    demonstrators see *full states* (DarkRoom: the cell; Key-to-Door: cell + size^2 * key carried); ``derive`` maps
    full-state columns to the stored ones. Every callable is a module-level function (a Ray work unit pickles the
    family by reference).
    """

    family: str  #: the dataset's family
    title: str  #: the family in pictures ("DarkRoom")
    tasks: Callable[[Any], list[Goal]]  #: the config's tasks, in order
    task_name: Callable[[int, Goal], str]  #: ``(size, task)`` -> the task's (unit's) name
    metadata: Callable[[Any, list[Goal]], dict[str, Any]]  #: the A2C dataset's metadata of the config's tasks
    steps_option: str  #: the config's option with the env steps per task (over its streams)
    make_env: Callable[[Any, list[Goal]], Any]  #: GridVectorEnv over (tasks x cfg.num_envs) observing full states
    tables: int = 1  #: full states per cell (Key-to-Door's 2: key carried or not): each agent has tables*size^2 rows
    extra_columns: dict[str, str] = dataclasses.field(default_factory=dict)  #: stored beside the core columns
    derive: Callable[[Any, Columns], Columns] | None = None  #: full-state columns -> stored columns (None: as is)
    pictures: Callable[..., None] | None = None  #: ``(cfg, run_dir, metadata, greedy)``: pictures beside the curves
    noun: str = "goals"  #: what the family's tasks are called in printed lines ("key/door pairs")

    def num_states(self, cfg: Any) -> int:
        """Full states: the rows of each agent's tables."""
        return self.tables * cfg.size * cfg.size

    def steps(self, cfg: Any) -> int:
        """Env steps per task (over its streams)."""
        return getattr(cfg, self.steps_option)

    def stored(self, cfg: Any, columns: Columns) -> Columns:
        """The columns stored for one unit's full-state ``columns``."""
        return columns if self.derive is None else self.derive(cfg, columns)


def history_spec(cfg: Any, family: GridFamily, critic: bool) -> HistorySpec:
    """A grid dataset's columns: the observed cell, the action, a scalar logprob, the critic's value (``critic``: the
    A2C's, whose logprobs keep ``--logprob-bits``) and the family's extra columns."""
    extra = {"value": "float32"} if critic else {}
    bits = {"logprob_bits": cfg.logprob_bits} if critic else {}
    return HistorySpec(state=ColumnSpec.discrete(cfg.size * cfg.size), action=ColumnSpec.discrete(NUM_ACTIONS),
                       logprob="scalar", extra={**extra, **family.extra_columns}, **bits)


def grid_metadata(cfg: Any, goals: list[Goal], task_name: Callable[[int, Goal], str],
                  describe: Callable[[Goal], dict[str, Any]], optimum: Callable[[Goal], float],
                  task_spec: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """A grid dataset's metadata: ``task_spec``, ``source``, seeds, the seeded split and per task its
    ``describe(goal)`` entries, split and optimal return."""
    train, heldout = split_goals(goals, cfg.heldout_fraction, cfg.seed)
    held = set(heldout)
    tasks = {task_name(cfg.size, g): {**describe(g), "split": "heldout" if g in held else "train",
                                      "optimal_return": optimum(g)} for g in goals}
    return {"task_spec": task_spec, "source": source, "seeds": {"seed": cfg.seed, "run": cfg.seed},
            "split": {"train": [task_name(cfg.size, g) for g in train],
                      "heldout": [task_name(cfg.size, g) for g in heldout]},
            "tasks": tasks}


def finite_or_none(value: float) -> float | None:
    """``value`` as a float, or None where it is NaN / infinite (JSON has no NaN)."""
    return float(value) if np.isfinite(value) else None


def ratio_summary(ratios: dict[str, float | None]) -> dict[str, Any]:
    """The learned counts and mean of per-task final ratios (None: no ratio), as strict JSON: a null mean and a
    note saying why when no task has a ratio, and how many tasks have none."""
    values = np.array([v for v in ratios.values() if v is not None], dtype=np.float64)
    learned = int((values >= LEARNED_RATIO).sum())
    out = {"goals": len(values), "learned_goals": learned, "learned_fraction": learned / max(len(values), 1),
           "mean_final_ratio": float(values.mean()) if len(values) else None,
           "tasks_without_ratio": len(ratios) - len(values)}
    if not len(values):
        out["mean_final_ratio_note"] = NO_RATIO.format(FINAL_FRACTION)
    return out


def ratio_text(value: float | None) -> str:
    """A summary's mean ratio for a progress line: 3 decimals, or why there is none."""
    return f"{value:.3f}" if value is not None else "none: no task finished an episode"
