"""The noise source on bandits (``ad generate bandit --source noise``): the best arm made epsilon-greedy, epsilon
falling over the pulls with the schedule of :mod:`tasks.noise` (one noise level per pull, ``update`` = the pull).

Each pull's expected reward at noise ``eps`` is ``(1 - eps) * max(means) + eps * mean(means)``, so a cap on the
data's best expected return (``--max-return-fraction``) is reachable only above uniformly random pulls' share of the
optimum, ``mean(means) / max(means)``: the floor's search refuses a lower cap with the value to pass.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tasks.bandit.algorithms import draw_rewards
from tasks.noise import TabularTasks, epsilon_floor, epsilon_greedy, epsilon_schedule, expected_return


def bandit_mdp(means: np.ndarray) -> TabularTasks:
    """Instances ``means`` (N, arms) as one-state, one-step tabular tasks whose demonstrator pulls the best arm."""
    n, arms = means.shape
    return TabularTasks(next_state=np.zeros((n, 1, arms), np.int64), reward=means[:, None, :].astype(np.float64),
                        done=np.ones((n, 1, arms), bool), start=np.ones((n, 1)),
                        greedy=means.argmax(axis=1)[:, None], horizon=1)


def noise_schedule(cfg: Any, means: np.ndarray, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The epsilon floor (N,) of each instance for ``cfg.max_return_fraction`` and its schedule (N, pulls)."""
    mdp = bandit_mdp(means)
    floor = epsilon_floor(lambda eps: expected_return(mdp, eps), means.max(axis=1), cfg.max_return_fraction, names)
    return floor, epsilon_schedule(cfg.pulls, cfg.noise_start, cfg.noise_end, cfg.noise_decay_fraction,
                                   cfg.noise_power, floor)


def run_noise(cfg: Any, means: np.ndarray, eps: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``cfg.pulls`` epsilon-greedy pulls of every instance (N, arms) at noise ``eps`` (N, pulls): ``action``,
    ``reward`` and ``logprob`` (the exact epsilon-greedy log-probability of the pulled arm), (N, pulls) each."""
    n, arms = means.shape
    best, rows = means.argmax(axis=1), np.arange(n)
    out = {"action": np.zeros((n, cfg.pulls), np.int64), "reward": np.zeros((n, cfg.pulls)),
           "logprob": np.zeros((n, cfg.pulls))}
    for t in range(cfg.pulls):
        action, logprob = epsilon_greedy(best, eps[:, t], rng.random(n), rng.integers(0, arms, n), arms)
        out["action"][:, t], out["logprob"][:, t] = action, logprob
        out["reward"][:, t] = draw_rewards(rng, cfg.kind, means[rows, action], cfg.noise_std)
    return out
