"""``ad generate keydoor --source explorer``: the grid rooms' nearest-unvisited explorer (:mod:`tasks.grid.explorer`)
on Key-to-Door, its two hidden cells the key and then the door.

Each stream searches the cells it has not yet stepped on without the key until it finds the key, then, carrying it,
the cells it has not yet stepped on with the key until it finds the door; it remembers both searches and both cells
across episodes, so a history goes from a search of the room to the shortest path through the key to the door. The
``state`` column stores the cell and ``key`` whether the key is carried, as the A2C source does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tasks.grid.explorer import explore
from tasks.grid.explorer_generate import Explorer

#: The explorer's options recorded as its config in the dataset metadata.
EXPLORER_OPTIONS = ("size", "tasks", "pairs", "steps_per_task", "seed", "heldout_fraction", "episode_length",
                    "random_start", "num_envs", "epsilon", "epsilon_after_goal")


def run_pair(cfg: Any, pair: tuple[int, ...], episodes: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The explorer's ``cfg.num_envs`` streams of ``episodes`` episodes on one (key row, key col, door row, door
    col) pair of an ``ad generate keydoor`` config: the stored columns and the episode returns (streams,
    episodes). The generator is seeded by (seed, pair)."""
    size = cfg.size
    rng = np.random.default_rng([int(cfg.seed), *(int(x) for x in pair)])
    columns, returns = explore(size, [pair[0] * size + pair[1], pair[2] * size + pair[3]], cfg.num_envs, episodes,
                               cfg.episode_length, cfg.epsilon, cfg.epsilon_after_goal, rng, cfg.random_start,
                               terminate_at_last=True)
    phase = columns.pop("phase")
    return {**columns, "key": phase > 0}, returns


#: Key-to-Door's explorer source.
KEYDOOR_EXPLORER = Explorer(run=run_pair, implementation="tasks.grid.explorer.explore", options=EXPLORER_OPTIONS)
