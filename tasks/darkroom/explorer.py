"""DarkRoom's nearest-unvisited explorer: the grid rooms' explorer (:mod:`tasks.grid.explorer`) with one hidden cell,
the goal.

Each stream keeps the set of cells it has stepped on, across episodes: until rewarded at the goal it walks to the
nearest unvisited cell (Manhattan distance, ties broken at random) by a random move that brings it closer; once
rewarded it walks to the goal and stays there. Each action is replaced by a uniformly random one with probability
``epsilon`` before the goal is found and ``epsilon_after_goal`` after (docs/experiments/darkroom.md). Every stream of
one goal runs vectorised, with a generator seeded by (seed, row, col).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tasks.grid.explorer import COLUMN_TYPES as EXPLORER_COLUMNS, explore
from tasks.grid.explorer_generate import Explorer

#: History columns of one goal, in the store's dtypes.
COLUMN_TYPES = {name: dtype for name, dtype in EXPLORER_COLUMNS.items() if name != "phase"}


def explore_goal(size: int, goal: tuple[int, int], streams: int, episodes: int, episode_length: int,
                 epsilon: float, epsilon_after_goal: float, seed: int, random_start: bool = False,
                 terminate_on_goal: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Histories of ``streams`` explorers on one goal: history columns (stream-major, time-ordered) and the return of
    every episode (streams, episodes); ``logprob`` is the exact log-probability of each action under the explorer's
    epsilon-mixed policy."""
    rng = np.random.default_rng([seed, goal[0], goal[1]])
    columns, returns = explore(size, [goal[0] * size + goal[1]], streams, episodes, episode_length, epsilon,
                              epsilon_after_goal, rng, random_start, terminate_at_last=terminate_on_goal,
                              start_searched=True)
    return {name: columns[name] for name in COLUMN_TYPES}, returns


#: The explorer's options recorded as its config in the dataset metadata.
EXPLORER_OPTIONS = ("size", "goals", "steps_per_goal", "seed", "heldout_fraction", "episode_length", "random_start",
                    "terminate_on_goal", "num_envs", "epsilon", "epsilon_after_goal")


def run_goal(cfg: Any, goal: tuple[int, ...], episodes: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The explorer's ``cfg.num_envs`` streams of ``episodes`` episodes on one goal of an ``ad generate darkroom``
    config."""
    return explore_goal(cfg.size, (goal[0], goal[1]), cfg.num_envs, episodes, cfg.episode_length, cfg.epsilon,
                        cfg.epsilon_after_goal, cfg.seed, cfg.random_start, cfg.terminate_on_goal)


#: DarkRoom's explorer source (recorded under its name from before the engine moved to tasks.grid: a resumed run
#: must match the dataset's).
DARKROOM_EXPLORER = Explorer(run=run_goal, implementation="tasks.darkroom.explorer.explore_goal",
                             options=EXPLORER_OPTIONS)
