"""``ad generate lunarlander --source noise``: noise distillation (AD-epsilon) on LunarLander, without any RL.

The demonstrator is Gymnasium's heuristic lander (``gymnasium.envs.box2d.lunar_lander.heuristic``), which lands on
the family's gravity and wind settings; on a task with swapped engines it acts through the inverse of the task's
``action_map`` (it fires the engine it means to fire). Each stream (history) plays ``--episodes`` episodes; in episode
``k`` it takes the demonstrator's action with probability ``1 - eps_k`` and a uniformly random action otherwise,
``eps_k`` from the schedule every family's noise source shares (:func:`tasks.noise.epsilon_schedule`). Recorded:
every transition, ``update`` = the episode index (the noise level that acted), ``logprob`` = the exact epsilon-greedy
log-probability of the action taken. Each task's draws come from its own generator, so its histories do not depend on
which tasks run beside it, and re-running an interrupted command writes only the missing units.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.history import HistoryWriter
from ad.record import HistoryRecorder
from tasks.lunarlander.config import GenerateConfig
from tasks.lunarlander.env import make_vector_env
from tasks.lunarlander.instances import ENGINES, task_name
from tasks.noise import epsilon_greedy, epsilon_schedule


def demonstrator_actions(units: list[Any], obs: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """The heuristic lander's action in each sub-env, as the agent's action that fires that engine, (N,).

    ``units`` are the sub-envs' unwrapped LunarLanders, ``obs`` (N, 8) their observations, ``inverse`` (N, 4) per
    sub-env the agent's action for each of Gymnasium's actions (the inverse of the task's ``action_map``)."""
    from gymnasium.envs.box2d.lunar_lander import heuristic

    meant = np.array([heuristic(unit, o) for unit, o in zip(units, obs)], dtype=np.int64)  # (N,) Gymnasium actions
    return inverse[np.arange(len(meant)), meant]


def step_streams(env: Any, action: np.ndarray, live: np.ndarray, obs: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step the sub-envs of vector env ``env`` where ``live`` (N,) is true, resetting each whose episode ends (the
    vector env's same-step autoreset); the others keep their observation (no reward, not done). Streams that have
    played all their episodes stop costing steps while the longest history finishes. Returns the next observations
    (N, 8), rewards (N,), terminated and truncated flags (N,)."""
    n = len(action)
    obs = obs.copy()
    reward, term, trunc = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool)
    for k in np.flatnonzero(live):
        sub = env.envs[k]
        obs[k], reward[k], term[k], trunc[k], _ = sub.step(int(action[k]))
        if term[k] or trunc[k]:
            obs[k], _ = sub.reset()
    return obs, reward, term, trunc


def run_noise_batch(cfg: GenerateConfig, todo: list[int], kwargs: list[dict[str, Any]], writer: HistoryWriter,
                    probe: Any) -> dict[str, float]:
    """Every task of ``todo`` x ``cfg.streams`` histories of ``cfg.episodes`` episodes in one vector env, recorded;
    commits each task's unit at the end (an exception aborts every unit of the batch: nothing partial is visible).
    Returns each task's mean return over its streams' last 10 episodes."""
    from ad.progress import Progress
    from tasks.lunarlander.generate import env_seed, recording, task_seed

    T, E, N = len(todo), cfg.streams, cfg.episodes
    num_actions = int(probe.action_space.n)
    env = make_vector_env(T * E, [kwargs[i] for i in todo])
    units = [sub.unwrapped for sub in env.envs]
    maps = np.array([kwargs[i].get("action_map", list(ENGINES)) for i in todo])  # (T, 4)
    inverse = np.repeat(np.argsort(maps, axis=1), E, axis=0)  # (T * E, 4)
    eps = epsilon_schedule(N, cfg.noise_start, cfg.noise_end, cfg.noise_decay_fraction, cfg.noise_power)  # (N,)
    rngs = [np.random.default_rng(task_seed(cfg.seed, i)) for i in todo]
    recorders = [HistoryRecorder(writer, task_name(i), cfg.seed, observation_space=probe.observation_space,
                                 action_space=probe.action_space) for i in todo]
    obs, _ = env.reset(seed=[env_seed(cfg.seed, i, s) for i in todo for s in range(E)])
    episode = np.zeros(T * E, np.int64)  # per stream: episodes finished
    ep_return = np.zeros(T * E)
    returns: list[list[list[float]]] = [[[] for _ in range(E)] for _ in range(T)]
    bar = Progress(T * E * N, desc=f"noisy heuristic lander on {T} LunarLander tasks", unit="episode",
                   show=cfg.progress)
    with recording(recorders, env, bar):
        while (episode < N).any():
            active = episode < N  # streams still recording; a finished stream's env stops
            greedy = np.zeros(T * E, np.int64)  # (T * E,) the demonstrator's action where a stream is active
            greedy[active] = demonstrator_actions([units[k] for k in np.flatnonzero(active)], obs[active],
                                                  inverse[active])
            draws = np.stack([rng.random(E) for rng in rngs]).reshape(-1)  # (T * E,) U(0, 1): explore where < eps
            random_action = np.stack([rng.integers(num_actions, size=E) for rng in rngs]).reshape(-1)
            level = eps[np.minimum(episode, N - 1)]  # (T * E,) each stream's epsilon in its current episode
            action, logprob = epsilon_greedy(greedy, level, draws, random_action, num_actions)
            acted = obs
            obs, reward, term, trunc = step_streams(env, action, active, obs)
            for j, rec in enumerate(recorders):
                sl = slice(j * E, (j + 1) * E)
                live = np.flatnonzero(active[sl])
                if len(live) == E:
                    rec.step(acted[sl], action[sl], reward[sl], term[sl], trunc[sl], logprob=logprob[sl],
                             update=episode[sl])
                elif len(live):
                    k = live + j * E
                    rec.step(acted[k], action[k], reward[k], term[k], trunc[k], logprob=logprob[k],
                             update=episode[k], streams=live)
            ep_return += reward
            ended = (term | trunc) & active
            for k in np.flatnonzero(ended):
                returns[k // E][k % E].append(float(ep_return[k]))
            ep_return[term | trunc] = 0.0
            episode += ended
            bar.update(int(ended.sum()))
        last = {}
        for j, (i, rec) in enumerate(zip(todo, recorders)):
            first = [r for stream in returns[j] for r in stream[:5]]
            tail = [r for stream in returns[j] for r in stream[-10:]]
            last[task_name(i)] = float(np.mean(tail))
            rec.close(info={"kwargs": kwargs[i], "episodes": N * E, "first_5_return": float(np.mean(first)),
                            "last_10_return": last[task_name(i)]})
        return last
