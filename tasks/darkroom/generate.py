"""``ad generate darkroom``: learning histories for every DarkRoom goal, into the history store.

The A2C source (the default) is the grid engine's (:mod:`tasks.grid.generate`) configured by :data:`DARKROOM`;
``--source explorer`` runs the explorer (:mod:`tasks.grid.explorer_generate`), ``--source noise`` the noisy
demonstrator and ``--source random`` random contexts (:mod:`tasks.darkroom.noise_generate`), with the same dataset
layout, task names, split and metadata. Each goal is one unit ``(task, run=seed)``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ad.config import data_options
from tasks.darkroom.config import GenerateConfig
from tasks.darkroom.goals import optimal_return, resolve_goals, task_name
from tasks.darkroom.vector_env import DarkRoomVectorEnv
from tasks.grid.family import GridFamily, grid_metadata
from tasks.grid.room import ACTION_NAMES, NUM_ACTIONS, start_cell
from tasks.source_options import EXPLORER_OPTIONS, NOISE_OPTIONS, RANDOM_OPTIONS

FAMILY = "darkroom"
#: Options of the explorer, noise and random sources only (left out of an A2C dataset's metadata, which stays what it was before them).
_EXPLORER_ONLY = ("source", *EXPLORER_OPTIONS, *NOISE_OPTIONS, *RANDOM_OPTIONS)


def dataset_metadata(cfg: GenerateConfig, goals: list[tuple[int, int]]) -> dict[str, Any]:
    """task_spec, source, seeds, split and per-task info (goal, optimal return, split) of a run."""
    task_spec = {"env": "darkroom", "env_class": "tasks.darkroom.env:DarkRoomEnv",
                 "vector_env_class": "tasks.darkroom.vector_env:DarkRoomVectorEnv", "size": cfg.size,
                 "episode_length": cfg.episode_length, "random_start": cfg.random_start,
                 "terminate_on_goal": cfg.terminate_on_goal, "start": list(start_cell(cfg.size)),
                 "num_states": cfg.size * cfg.size, "num_actions": NUM_ACTIONS, "actions": list(ACTION_NAMES),
                 "observation": "cell index row*size+col"}
    config = {k: v for k, v in data_options(cfg).items() if k not in _EXPLORER_ONLY}
    # the implementation's name from before the engine moved to tasks.grid: a resumed run must match the dataset's
    source = {"algorithm": "a2c", "implementation": "tasks.darkroom.a2c.BatchedA2C", "config": config}
    return grid_metadata(cfg, goals, task_name, lambda g: {"goal": list(g)},
                         lambda g: optimal_return(cfg.size, g, cfg.episode_length, cfg.terminate_on_goal,
                                                  cfg.random_start), task_spec, source)


def make_env(cfg: GenerateConfig, goals: list[tuple[int, ...]]) -> DarkRoomVectorEnv:
    """The agents' vector env: ``goals`` x ``cfg.num_envs`` DarkRoom sub-envs, goal-major."""
    return DarkRoomVectorEnv(goals, cfg.num_envs, cfg.size, cfg.episode_length, cfg.random_start,
                             cfg.terminate_on_goal)


def greedy_gif(cfg: GenerateConfig, run_dir: Path, metadata: dict[str, Any], greedy: dict[str, np.ndarray]) -> None:
    """greedy_policy.gif: one episode of the greedy policy of ``--gif-goals`` goals trained in this run."""
    from tasks.grid.plots import greedy_policy_gif

    if not cfg.gif_goals:
        return
    names = list(greedy)
    shown = names[:: max(1, len(names) // cfg.gif_goals)][: cfg.gif_goals]
    env = DarkRoomVectorEnv([tuple(metadata["tasks"][n]["goal"]) for n in shown], 1, cfg.size, cfg.episode_length,
                            terminate_on_goal=cfg.terminate_on_goal)  # from the centre, as the picture always was
    greedy_policy_gif(run_dir / "greedy_policy.gif", env, np.stack([greedy[n] for n in shown]))


def _tasks(cfg: GenerateConfig) -> list[tuple[int, int]]:
    return resolve_goals(cfg.goals, cfg.size)


#: DarkRoom as a configuration of the grid engine: its goals, names, metadata and env.
DARKROOM = GridFamily(family=FAMILY, title="DarkRoom", tasks=_tasks, task_name=task_name, metadata=dataset_metadata,
                      steps_option="steps_per_goal", make_env=make_env, pictures=greedy_gif)


def generate(cfg: GenerateConfig) -> Path | str:
    """Run the ``cfg.source`` source (A2C, explorer, noise or random) on every goal of ``cfg``, write the learning histories
    to ``cfg.out``; returns the dataset path (a ``Path`` for a local dataset, else the ``--out`` URL)."""
    if cfg.source == "explorer":
        from tasks.darkroom.explorer import DARKROOM_EXPLORER
        from tasks.grid.explorer_generate import generate_explorer

        return generate_explorer(cfg, DARKROOM, DARKROOM_EXPLORER)
    if cfg.source in ("noise", "random"):
        from tasks.darkroom.noise_generate import generate_darkroom_noise

        return generate_darkroom_noise(cfg)
    from tasks.grid.generate import generate_a2c

    return generate_a2c(cfg, DARKROOM)
