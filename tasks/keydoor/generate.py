"""``ad generate keydoor``: A2C learning histories on Dark Key-to-Door tasks, into the history store.

    from ad.config import make_config
    from tasks.keydoor.config import GenerateConfig
    from tasks.keydoor.generate import generate
    path = generate(make_config(GenerateConfig, {"out": "data/keydoor", "tasks": 400}))

DarkRoom's generator (:func:`tasks.darkroom.generate.generate`) with the Key-to-Door family plugged in
(:data:`KEYDOOR`): the same batching, resuming (re-running the command skips committed tasks), Ray backend, run
folder (``<out>/_run``: summary.json, learning_curves.png) and bit-identical histories whatever the batching.
The agents see (cell, key carried); the ``state`` column is the observed cell and ``key`` the flag.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from ad.config import data_options
from ad.history import ColumnSpec, HistorySpec
from tasks.darkroom.generate import GridSource
from tasks.darkroom.generate import generate as generate_grid
from tasks.darkroom.goals import ACTION_NAMES, NUM_ACTIONS, start_cell
from tasks.keydoor.a2c import KeyDoorA2C
from tasks.keydoor.config import GenerateConfig
from tasks.keydoor.pairs import Pair, optimal_return, split_pairs, task_name
from tasks.noise import without_noise_options
from tasks.random_source import without_random_options

FAMILY = "keydoor"


def history_spec(cfg: GenerateConfig) -> HistorySpec:
    """Columns: the observed cell, the action, a scalar logprob, the critic's value and the key-carried flag."""
    return HistorySpec(state=ColumnSpec.discrete(cfg.size * cfg.size), action=ColumnSpec.discrete(NUM_ACTIONS),
                       logprob="scalar", extra={"value": "float32", "key": "bool"}, logprob_bits=cfg.logprob_bits)


def dataset_metadata(cfg: GenerateConfig, pairs: list[Pair]) -> dict[str, Any]:
    """task_spec, source, seeds, split and per-task info (key, door, optimal return, split) of a run."""
    train, heldout = split_pairs(pairs, cfg.heldout_fraction, cfg.seed)
    held = set(heldout)
    tasks = {task_name(cfg.size, p): {"key": list(p[:2]), "door": list(p[2:]),
                                      "split": "heldout" if p in held else "train",
                                      "optimal_return": optimal_return(cfg.size, p, cfg.episode_length,
                                                                       cfg.random_start)} for p in pairs}
    source = {k: v for k, v in without_random_options(without_noise_options(data_options(cfg))).items()
              if k != "source"}  # the A2C's
    return {
        "task_spec": {"env": "keydoor", "env_class": "tasks.keydoor.env:KeyDoorEnv",
                      "vector_env_class": "tasks.keydoor.vector_env:KeyDoorVectorEnv", "size": cfg.size,
                      "episode_length": cfg.episode_length, "random_start": cfg.random_start,
                      "start": list(start_cell(cfg.size)), "num_states": cfg.size * cfg.size,
                      "num_actions": NUM_ACTIONS, "actions": list(ACTION_NAMES),
                      "observation": "cell index row*size+col (the key-carried flag is not observed)",
                      "rewards": "1 on first reaching the key, 1 on reaching the door with the key (episode ends)"},
        "source": {"algorithm": "a2c", "implementation": "tasks.keydoor.a2c.KeyDoorA2C",
                   "states": "(cell, key carried): 2 * size^2 table rows", "config": source},
        "seeds": {"seed": cfg.seed, "run": cfg.seed},
        "split": {"train": [task_name(cfg.size, p) for p in train],
                  "heldout": [task_name(cfg.size, p) for p in heldout]},
        "tasks": tasks,
    }


def observed_columns(cfg: GenerateConfig) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """The stored columns of a unit batch: the agent's state ``cell + size^2 * key`` split into cell and key."""
    cells = cfg.size * cfg.size

    def derive(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        state = batch["state"]  # (n,) agent states
        return {**batch, "state": (state % cells).astype(state.dtype), "key": state >= cells}

    return derive


def _pictures(cfg: GenerateConfig, run_dir: Path, metadata: dict[str, Any],
              curves: dict[str, tuple[np.ndarray, np.ndarray]], greedy: dict[str, np.ndarray]) -> None:
    """learning_curves.png of the tasks trained in this run."""
    from tasks.darkroom.plots import plot_learning_curves

    names = list(curves)
    curve = np.stack([curves[n][1] for n in names], axis=1)  # (P, T)
    optimum = np.array([metadata["tasks"][n]["optimal_return"] for n in names])  # (T,)
    plot_learning_curves(run_dir / "learning_curves.png", curves[names[0]][0], curve, optimum, names)


def _goals(cfg: GenerateConfig) -> list[Pair]:
    return cfg.task_pairs()


def _task_name(cfg: GenerateConfig, pair: Pair) -> str:
    return task_name(cfg.size, pair)


#: The Key-to-Door family of the batched-A2C generator.
KEYDOOR = GridSource(family=FAMILY, goals=_goals, task_name=_task_name, metadata=dataset_metadata, spec=history_spec,
                     agent=KeyDoorA2C, derive=observed_columns, pictures=_pictures, noun="key/door pairs")


def generate(cfg: GenerateConfig) -> Path | str:
    """Run A2C (or, with ``cfg.source == "noise"``, the noise source) on every task of ``cfg``, write the learning
    histories to ``cfg.out``; returns the dataset path."""
    if cfg.source in ("noise", "random"):
        from tasks.keydoor.noise_generate import generate_keydoor_noise

        return generate_keydoor_noise(cfg)
    return generate_grid(cfg, KEYDOOR)
