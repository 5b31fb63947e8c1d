"""``ad generate darkroom --source noise`` (and ``--source random``): the grid noise source (:mod:`tasks.grid.noise`)
on DarkRoom goals.

The demonstrator walks a shortest path to the goal (:func:`tasks.grid.room.shortest_path_actions`) and is made
epsilon-greedy with the schedule of :mod:`tasks.noise`; the dataset has the A2C source's layout, task names, split and
metadata, with the noise source in ``source``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks.darkroom.generate import DARKROOM
from tasks.grid.noise import Demonstrator, generate_noise, start_distribution
from tasks.grid.room import NUM_ACTIONS, shortest_path_actions, transition_table
from tasks.noise import TabularTasks


def room_mdp(size: int, targets: np.ndarray, episode_length: int, terminate: bool, random_start: bool,
             greedy: np.ndarray) -> TabularTasks:
    """DarkRoom goals ``targets`` (T,) cells as tabular MDPs over cells (reward 1 on stepping onto / staying on the
    goal; terminal there with ``terminate``), with the demonstrator ``greedy`` (T, S)."""
    S = size * size
    next_cell = np.broadcast_to(transition_table(size), (len(targets), S, NUM_ACTIONS))  # (T, S, A)
    reward = (next_cell == targets[:, None, None]).astype(np.float64)
    done = reward > 0 if terminate else np.zeros_like(reward, dtype=bool)
    return TabularTasks(next_cell, reward, done, start_distribution(size, len(targets), random_start, S), greedy,
                        episode_length)


def greedy(cfg: Any, goal: tuple[int, ...]) -> np.ndarray:
    """The demonstrator's action per cell (S,): a shortest-path step to the goal."""
    return shortest_path_actions(cfg.size, goal[0] * cfg.size + goal[1])


def goal_mdp(cfg: Any, goals: list[tuple[int, ...]]) -> TabularTasks:
    """The config's goals as tabular MDPs over cells, with the demonstrator."""
    targets = np.array([g[0] * cfg.size + g[1] for g in goals], dtype=np.int64)
    return room_mdp(cfg.size, targets, cfg.episode_length, cfg.terminate_on_goal, cfg.random_start,
                    np.stack([greedy(cfg, g) for g in goals]))


def generate_darkroom_noise(cfg: Any) -> Path | str:
    """``ad generate darkroom --source noise``."""
    return generate_noise(cfg, DARKROOM, Demonstrator(greedy, goal_mdp))
