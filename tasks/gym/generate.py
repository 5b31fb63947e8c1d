"""``ad generate gym``: a Stable-Baselines3 algorithm learns every task of a distribution over one Gymnasium env,
and :class:`ad.record.HistoryRecorder` writes each run's whole learning history (units: task x run)."""
from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from ad.errors import UserError
from ad.families import seeded_split
from ad.history import HistoryWriter
from ad.record import HistoryRecorder, env_spec, recording_spec
from tasks.gym.config import GymGenerateConfig
from tasks.gym.envs import check_same_spaces, make_env
from tasks.gym.task_file import load_tasks, task_prefix

FAMILY = "gym"


def run_seed(seed: int, task_index: int, run: int) -> int:
    """The algorithm's seed of one unit: depends on the command's seed, the task and the run only."""
    return int(np.random.SeedSequence([seed, task_index, run]).generate_state(1)[0] % (2**31 - 1))


def make_algorithm(algo: Any, env: Any, cfg: GymGenerateConfig, seed: int) -> Any:
    """The SB3 algorithm on ``env``; constructor arguments it rejects (or an action space it cannot act in) are a
    UserError."""
    from stable_baselines3.common.logger import Logger

    try:
        model = algo("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **cfg.algo_kwargs)
    except (TypeError, ValueError, AssertionError) as err:
        raise UserError(f"{cfg.algo} cannot be built with --algo-kwargs {json.dumps(cfg.algo_kwargs)} on {cfg.env}: "
                        f"{' '.join(str(err).split())}") from None
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default logger leaves an empty /tmp/SB3-* folder
    return model


def dataset_metadata(cfg: GymGenerateConfig, tasks: list[dict[str, Any]], reference: float | None,
                     first: Any) -> dict[str, Any]:
    """task_spec (env id, spaces), source, seed, split and each task's kwargs."""
    names = [f"{task_prefix(cfg.env)}-t{i:04d}" for i in range(len(tasks))]
    train, heldout = seeded_split(len(tasks), cfg.heldout_fraction, cfg.seed)
    role = {i: "heldout" for i in heldout}
    return {
        "task_spec": {**env_spec(first.observation_space, first.action_space, cfg.env),
                      "episode_length": first.spec.max_episode_steps if first.spec else None},
        "source": {"algorithm": cfg.algo, "algo_kwargs": cfg.algo_kwargs, "steps": cfg.steps, "runs": cfg.runs},
        "seed": cfg.seed,
        "split": {"train": [names[i] for i in train], "heldout": [names[i] for i in heldout]},
        "tasks": {name: {"kwargs": tasks[i], "split": role.get(i, "train"), "optimal_return": reference}
                  for i, name in enumerate(names)},
    }


def generate(cfg: GymGenerateConfig) -> dict[str, Any]:
    """Run the source algorithm on every task x run not yet in ``cfg.out`` and record it; returns a summary."""
    import torch
    import stable_baselines3

    from ad.progress import Progress

    torch.set_num_threads(1)  # small MLPs: one thread is fastest, and units stay reproducible
    tasks, reference = load_tasks(cfg.tasks, cfg.seed)
    first = make_env(cfg.env, tasks[0], "task 0")
    metadata = dataset_metadata(cfg, tasks, reference, first)
    names = list(metadata["tasks"])
    algo = getattr(stable_baselines3, cfg.algo.partition(":")[2])
    value = True
    writer = HistoryWriter(cfg.out, recording_spec(first.observation_space, first.action_space, value), FAMILY,
                           metadata)
    started = time.time()
    todo = [(i, run) for i in range(len(names)) for run in range(cfg.runs) if not writer.is_complete(names[i], run)]
    with writer, Progress(len(todo), desc=f"gym {cfg.env} {cfg.algo}", unit="run", show=cfg.progress) as bar:
        for i, run in todo:
            env = make_env(cfg.env, tasks[i], f"task {i}")
            check_same_spaces(env, first, f"task {i} {json.dumps(tasks[i])}")
            recorder = HistoryRecorder(writer, names[i], run, observation_space=env.observation_space,
                                       action_space=env.action_space, value=value)
            try:
                model = make_algorithm(algo, env, cfg, run_seed(cfg.seed, i, run))
                model.learn(cfg.steps, callback=recorder.sb3_callback())
            except BaseException:
                recorder.abort()
                raise
            recorder.close(info={"kwargs": tasks[i]})
            env.close()
            bar.update(1)
    return {"out": str(writer.location), "tasks": len(names), "runs": cfg.runs, "units_written": len(todo),
            "seconds": round(time.time() - started, 1)}
