"""The random source on bandits (``ad generate bandit --source random``): each instance's history pulls its arms from
its own action distribution, drawn independently of the arm means (:mod:`tasks.random_source`: the DPT paper's
bandit contexts), ``update`` = the pull, ``logprob`` = the exact probability of the pulled arm."""
from __future__ import annotations

from typing import Any

import numpy as np

from tasks.bandit.algorithms import draw_rewards
from tasks.random_source import behaviour_distributions, sample_actions


def run_random(cfg: Any, means: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``cfg.pulls`` pulls of every instance (N, arms) from its own drawn distribution: ``action``, ``reward`` and
    ``logprob`` (N, pulls) and the distributions ``probs`` (N, arms)."""
    n, arms = means.shape
    probs = behaviour_distributions(rng, n, arms, cfg.random_policy, cfg.random_alpha, cfg.random_mix)
    action, logprob = sample_actions(probs, rng.random((n, cfg.pulls)))
    pulled = np.take_along_axis(means, action, axis=1)  # (N, pulls)
    reward = draw_rewards(rng, cfg.kind, pulled.ravel(), cfg.noise_std).reshape(pulled.shape)
    return {"action": action, "reward": reward, "logprob": logprob, "probs": probs}
