"""``ad generate keydoor``: A2C learning histories on Dark Key-to-Door tasks, into the history store.

The grid engine's A2C source (:mod:`tasks.grid.generate`) configured by :data:`KEYDOOR`. The source sees the full
state: each agent's tables have ``2 * size**2`` rows (cell ``c`` with the key is state ``c + size**2``:
:class:`~tasks.keydoor.vector_env.KeyDoorVectorEnv` with ``observe_key``); the history stores the observed cell in
``state`` and the flag in a ``key`` column, so the transformer must infer the flag from the rewards in its context.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ad.config import data_options
from tasks.grid.family import GridFamily, grid_metadata
from tasks.grid.room import ACTION_NAMES, NUM_ACTIONS, start_cell
from tasks.keydoor.config import GenerateConfig
from tasks.keydoor.pairs import Pair, optimal_return, task_name
from tasks.keydoor.vector_env import KeyDoorVectorEnv
from tasks.source_options import without_explorer_options, without_noise_options, without_random_options

FAMILY = "keydoor"


def dataset_metadata(cfg: GenerateConfig, pairs: list[Pair]) -> dict[str, Any]:
    """task_spec, source, seeds, split and per-task info (key, door, optimal return, split) of a run."""
    task_spec = {"env": "keydoor", "env_class": "tasks.keydoor.env:KeyDoorEnv",
                 "vector_env_class": "tasks.keydoor.vector_env:KeyDoorVectorEnv", "size": cfg.size,
                 "episode_length": cfg.episode_length, "random_start": cfg.random_start,
                 "start": list(start_cell(cfg.size)), "num_states": cfg.size * cfg.size,
                 "num_actions": NUM_ACTIONS, "actions": list(ACTION_NAMES),
                 "observation": "cell index row*size+col (the key-carried flag is not observed)",
                 "rewards": "1 on first reaching the key, 1 on reaching the door with the key (episode ends)"}
    config = {k: v for k, v in without_explorer_options(without_random_options(without_noise_options(
        data_options(cfg)))).items()
              if k != "source"}  # the A2C's
    # the implementation's name from before the engine moved to tasks.grid: a resumed run must match the dataset's
    source = {"algorithm": "a2c", "implementation": "tasks.keydoor.a2c.KeyDoorA2C",
              "states": "(cell, key carried): 2 * size^2 table rows", "config": config}
    return grid_metadata(cfg, pairs, task_name, lambda p: {"key": list(p[:2]), "door": list(p[2:])},
                         lambda p: optimal_return(cfg.size, p, cfg.episode_length, cfg.random_start), task_spec,
                         source)


def make_env(cfg: GenerateConfig, pairs: list[Pair]) -> KeyDoorVectorEnv:
    """The agents' (and the demonstrator's) vector env: ``pairs`` x ``cfg.num_envs`` sub-envs observing the full
    state ``cell + size^2 * key carried``."""
    return KeyDoorVectorEnv(pairs, cfg.num_envs, cfg.size, cfg.episode_length, cfg.random_start, observe_key=True)


def observed(cfg: GenerateConfig, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Stored columns: the full state ``cell + size^2 * key`` split into the observed cell and the key flag."""
    cells = cfg.size * cfg.size
    state = columns["state"]
    return {**columns, "state": (state % cells).astype(state.dtype), "key": state >= cells}


def _tasks(cfg: GenerateConfig) -> list[Pair]:
    return cfg.task_pairs()


#: Key-to-Door as a configuration of the grid engine: its pairs, names, metadata, full-state env and stored columns.
KEYDOOR = GridFamily(family=FAMILY, title="Dark Key-to-Door", tasks=_tasks, task_name=task_name,
                     metadata=dataset_metadata, steps_option="steps_per_task", make_env=make_env,
                     tables=2, extra_columns={"key": "bool"}, derive=observed, noun="key/door pairs")


def generate(cfg: GenerateConfig) -> Path | str:
    """Run A2C (or, with ``cfg.source`` explorer, the grid explorer; noise or random, the grid noise engine) on every
    task of ``cfg``, write the learning histories to ``cfg.out``; returns the dataset path."""
    if cfg.source == "explorer":
        from tasks.grid.explorer_generate import generate_explorer
        from tasks.keydoor.explorer import KEYDOOR_EXPLORER

        return generate_explorer(cfg, KEYDOOR, KEYDOOR_EXPLORER)
    if cfg.source in ("noise", "random"):
        from tasks.keydoor.noise_generate import generate_keydoor_noise

        return generate_keydoor_noise(cfg)
    from tasks.grid.generate import generate_a2c

    return generate_a2c(cfg, KEYDOOR)
