"""``ad generate lunarlander``: a batched PPO (:mod:`tasks.lunarlander.ppo`) learns every task at once (or, with
``--source noise``, the noisy heuristic lander of :mod:`tasks.lunarlander.noise_generate` plays every task), and every
transition goes to the store through :class:`ad.record.HistoryRecorder` (units: task x run, run = ``--seed``).

Layout: task = one gravity / wind setting (``lunarlander-t0007``), ``--streams`` envs per task = its streams; ``update``
is the task's PPO optimiser steps before the action was chosen, ``logprob`` the sampled action's log-probability
under the task's policy, ``value`` its critic's estimate. Re-running an interrupted command runs only the tasks whose
unit is missing; each task's history depends on its own seed (weights, draws, env seeds), not on the batch.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from ad.families import seeded_split
from ad.history import HistoryWriter
from ad.record import HistoryRecorder, env_spec, recording_spec
from tasks.lunarlander.config import NOISE_ONLY, PPO_ONLY, GenerateConfig
from tasks.lunarlander.env import EPISODE_LENGTH, GYM_ID, LunarLanderTask, make_vector_env
from tasks.lunarlander.instances import SOLVED, sample_tasks, task_name
from tasks.source_options import NOISE_OPTIONS

FAMILY = "lunarlander"


def task_seed(seed: int, task: int) -> int:
    """The learner's seed of one task: depends on the command's seed and the task index only."""
    return int(np.random.SeedSequence([seed, task, 11]).generate_state(1)[0])


def env_seed(seed: int, task: int, stream: int) -> int:
    """The env seed of one stream of one task."""
    return int(np.random.SeedSequence([seed, task, stream, 13]).generate_state(1)[0] % (2**31 - 1))


def task_kwargs(cfg: GenerateConfig) -> list[dict[str, Any]]:
    """Every task's LunarLander kwargs (drawn from the config's ranges with ``--seed``)."""
    return sample_tasks(cfg.tasks, cfg.seed, (cfg.gravity_low, cfg.gravity_high), cfg.wind_fraction,
                        (0.0, cfg.wind_power_max), (0.0, cfg.turbulence_power_max), cfg.swap_fraction)


def dataset_metadata(cfg: GenerateConfig, kwargs: list[dict[str, Any]], probe: Any) -> dict[str, Any]:
    """task_spec (Gymnasium id, spaces), source and its config, seed, split and every task's kwargs."""
    from ad.config import data_options

    names = [task_name(i) for i in range(cfg.tasks)]
    train, heldout = seeded_split(cfg.tasks, cfg.heldout_fraction, cfg.seed)
    role = {i: "heldout" for i in heldout}
    return {
        "task_spec": {**env_spec(probe.observation_space, probe.action_space, GYM_ID), "env": "lunarlander",
                      "env_class": "tasks.lunarlander.env:LunarLanderTask",
                      "vector_env_class": "tasks.lunarlander.env:make_vector_env", "episode_length": EPISODE_LENGTH,
                      "num_actions": int(probe.action_space.n), "state_dim": int(probe.observation_space.shape[0])},
        "source": source_metadata(cfg, data_options(cfg)),
        "seeds": {"seed": cfg.seed, "run": cfg.seed},
        "split": {"train": [names[i] for i in train], "heldout": [names[i] for i in heldout]},
        "tasks": {name: {"kwargs": kwargs[i], "split": role.get(i, "train"), "optimal_return": SOLVED}
                  for i, name in enumerate(names)},
    }


def source_metadata(cfg: GenerateConfig, options: dict[str, Any]) -> dict[str, Any]:
    """The dataset's ``source`` record: the algorithm and its options (the PPO source's without the noise source's
    options, so its metadata, and resuming a PPO dataset, are what they were before the noise source existed)."""
    if cfg.source == "noise":
        return {"algorithm": "noise", "demonstrator": "gymnasium.envs.box2d.lunar_lander.heuristic",
                "implementation": "tasks.lunarlander.noise_generate.run_noise_batch",
                "config": {k: v for k, v in options.items() if k not in PPO_ONLY}}
    kept = {k: v for k, v in options.items() if k not in NOISE_ONLY and k not in NOISE_OPTIONS}
    return {"algorithm": "ppo", "implementation": "tasks.lunarlander.ppo.BatchedPPO", "config": kept}


def generate(cfg: GenerateConfig) -> dict[str, Any]:
    """Learn (or, with ``--source noise``, play) and record every task not yet in ``cfg.out``; returns a summary (per
    task: mean return of the last 10 episodes of its streams)."""
    noise = cfg.source == "noise"
    if not noise:
        import torch

        torch.set_num_threads(1)  # many small matmuls: one thread is fastest, and runs stay reproducible
    kwargs = task_kwargs(cfg)
    probe = LunarLanderTask()
    metadata = dataset_metadata(cfg, kwargs, probe)
    names = list(metadata["tasks"])
    spec = recording_spec(probe.observation_space, probe.action_space, value=not noise)  # PPO records its values
    writer = HistoryWriter(cfg.out, spec, FAMILY, metadata, planned_tasks=cfg.tasks)
    started = time.time()
    todo = [i for i in range(cfg.tasks) if not writer.is_complete(names[i], cfg.seed)]
    if len(todo) < cfg.tasks:
        print(f"resuming: {cfg.tasks - len(todo)} of {cfg.tasks} tasks already in {writer.location}")
    final: dict[str, float] = {}
    try:
        if todo and noise:
            from tasks.lunarlander.noise_generate import run_noise_batch

            final = run_noise_batch(cfg, todo, kwargs, writer, probe)
        elif todo:
            final = run_batch(cfg, todo, kwargs, writer, probe)
    finally:
        writer.close()
    return {"out": str(writer.location), "tasks": cfg.tasks, "units_written": len(todo),
            "last_10_returns": final, "seconds": round(time.time() - started, 1)}


@contextmanager
def recording(recorders: list[HistoryRecorder], env: Any, bar: Any) -> Iterator[None]:
    """Around a batch's run: any exception (an interrupt included) aborts every recorder's unit, so nothing partial
    is visible; the env and the progress bar are closed either way."""
    try:
        yield
    except BaseException:
        for rec in recorders:
            rec.abort()
        raise
    finally:
        env.close()
        bar.close()


def run_batch(cfg: GenerateConfig, todo: list[int], kwargs: list[dict[str, Any]], writer: HistoryWriter,
              probe: Any) -> dict[str, float]:
    """One batched PPO over the tasks ``todo`` x ``cfg.streams`` envs, recorded; commits each task's unit at the
    end (an exception aborts every unit of the batch: nothing partial is visible)."""
    from ad.progress import Progress
    from tasks.lunarlander.ppo import BatchedPPO

    T, E, R = len(todo), cfg.streams, cfg.rollout
    env = make_vector_env(T * E, [kwargs[i] for i in todo])
    learner = BatchedPPO(cfg, [task_seed(cfg.seed, i) for i in todo], probe.observation_space.shape[0],
                         int(probe.action_space.n))
    recorders = [HistoryRecorder(writer, task_name(i), cfg.seed, observation_space=probe.observation_space,
                                 action_space=probe.action_space, value=True) for i in todo]
    obs, _ = env.reset(seed=[env_seed(cfg.seed, i, s) for i in todo for s in range(E)])
    ep_return = np.zeros(T * E)
    finished: list[list[float]] = [[] for _ in range(T)]
    bar = Progress(cfg.updates * R * E * T, desc=f"batched PPO on {T} LunarLander tasks", unit="step",
                   show=cfg.progress)
    with recording(recorders, env, bar):
        for _ in range(cfg.updates):
            u = learner.uniforms(R, E)  # (R, T, E)
            buf: dict[str, list[np.ndarray]] = {k: [] for k in ("obs", "action", "logprob", "value", "reward", "done")}
            for t in range(R):
                o = obs.reshape(T, E, -1)
                action, logprob, value = learner.act(o, u[t])
                obs, reward, term, trunc, info = env.step(action.reshape(-1))
                for j, rec in enumerate(recorders):
                    sl = slice(j * E, (j + 1) * E)
                    rec.step(o[j], action[j], reward[sl], term[sl], trunc[sl], logprob=logprob[j],
                             update=learner.updates, value=value[j])
                ep_return += reward
                ended = term | trunc
                for k in np.flatnonzero(ended):
                    finished[k // E].append(float(ep_return[k]))
                ep_return[ended] = 0.0
                boot = _bootstrap(learner, info, trunc & ~term, T, E) * cfg.gamma
                for name, x in (("obs", o), ("action", action), ("logprob", logprob), ("value", value),
                                ("reward", (reward + boot).reshape(T, E).astype(np.float32)),
                                ("done", ended.reshape(T, E))):
                    buf[name].append(x)
            learner.update({k: np.stack(v) for k, v in buf.items()}, learner.value(obs.reshape(T, E, -1)))
            bar.update(R * E * T)
        last = {}
        for j, (i, rec) in enumerate(zip(todo, recorders)):
            tail = finished[j][-10:]
            last[task_name(i)] = float(np.mean(tail)) if tail else float("nan")
            rec.close(info={"kwargs": kwargs[i], "episodes": len(finished[j]), "updates": learner.updates,
                            "last_10_return": last[task_name(i)]})
        return last


def _bootstrap(learner: Any, info: dict[str, Any], truncated: np.ndarray, T: int, E: int) -> np.ndarray:
    """The value of each truncated (not terminated) episode's final observation (0 elsewhere), (T * E,)."""
    out = np.zeros(T * E, np.float32)
    if truncated.any():
        final = np.zeros((T * E, learner.obs_dim), np.float32)
        for k in np.flatnonzero(truncated):
            final[k] = info["final_obs"][k]
        out[truncated] = learner.value(final.reshape(T, E, -1)).reshape(-1)[truncated]
    return out
