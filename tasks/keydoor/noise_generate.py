"""``ad generate keydoor --source noise``: the grid noise source (:mod:`tasks.grid.noise`) on Key-to-Door tasks.

The demonstrator walks a shortest path to the key, then to the door (it sees whether the key is carried: the vector
env's ``observe_key`` state ``cell + size^2 * key``), made epsilon-greedy with the schedule of :mod:`tasks.noise`. The
``state`` column stores the observed cell and ``key`` the flag, as the A2C source does.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks.grid.noise import Demonstrator, generate_noise, start_distribution
from tasks.grid.room import NUM_ACTIONS, shortest_path_actions, transition_table
from tasks.keydoor.generate import KEYDOOR
from tasks.keydoor.pairs import Pair
from tasks.noise import TabularTasks


def greedy(cfg: Any, pair: Pair) -> np.ndarray:
    """The demonstrator's action per (cell, key carried) state (2 * size^2,): towards the key, then the door."""
    size = cfg.size
    to_key = shortest_path_actions(size, pair[0] * size + pair[1])
    to_door = shortest_path_actions(size, pair[2] * size + pair[3])
    return np.concatenate([to_key, to_door])


def pair_mdp(cfg: Any, pairs: list[Pair]) -> TabularTasks:
    """Key-to-Door tasks as tabular MDPs over (cell, key carried): reward 1 on stepping onto the key without it (the
    key is then carried), 1 on stepping onto the door with it (terminal)."""
    size, S = cfg.size, cfg.size * cfg.size
    move = transition_table(size)  # (S, A)
    T = len(pairs)
    key = np.array([p[0] * size + p[1] for p in pairs])[:, None, None]  # (T, 1, 1)
    door = np.array([p[2] * size + p[3] for p in pairs])[:, None, None]
    cell = np.broadcast_to(move, (T, S, NUM_ACTIONS))  # (T, S, A) cell after the move
    got_key, at_door = cell == key, cell == door
    next_state = np.concatenate([np.where(got_key, cell + S, cell), cell + S], axis=1)  # (T, 2S, A)
    reward = np.concatenate([got_key, at_door], axis=1).astype(np.float64)
    done = np.concatenate([np.zeros_like(at_door), at_door], axis=1)
    start = start_distribution(size, T, cfg.random_start, 2 * S)
    return TabularTasks(next_state, reward, done, start, np.stack([greedy(cfg, p) for p in pairs]),
                        cfg.episode_length)


def generate_keydoor_noise(cfg: Any) -> Path | str:
    """``ad generate keydoor --source noise``."""
    return generate_noise(cfg, KEYDOOR, Demonstrator(greedy, pair_mdp))
