"""Noise distillation for continuous actions: a scripted expert's action plus Gaussian noise whose scale falls over
each learning history (the AD-epsilon recipe, with a noise scale in place of the probability of a random action).

Episode ``e`` of a history of ``E`` episodes acts with ``a = clip(mu + sigma_e * z, -1, 1)``, ``mu`` the expert's
action, ``z ~ N(0, I)``, and ``sigma_e`` falling geometrically from ``noise_max`` (episode 0) to ``noise_min`` (the
last episode): :func:`noise_schedule`. The behaviour policy is therefore a Gaussian clipped to the action box, whose
density has point masses at the bounds; :func:`clipped_gaussian_logprob` is the log-density of an action under it
(per dimension: the Gaussian log-density inside the box, the log of the clipped tail's mass on a bound), summed over
the action's dimensions.
"""
from __future__ import annotations

import numpy as np


def noise_schedule(episodes: int, noise_max: float, noise_min: float) -> np.ndarray:
    """(episodes,) noise scales from ``noise_max`` down to ``noise_min``, evenly spaced in log scale (one episode:
    ``noise_max``)."""
    if episodes == 1:
        return np.array([noise_max], dtype=np.float64)
    return np.geomspace(noise_max, noise_min, episodes)


def clipped_gaussian_logprob(action: np.ndarray, mean: np.ndarray, sigma: np.ndarray,
                             low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """(N,) log-density of ``action`` (N, D) under ``clip(N(mean, sigma^2 I), low, high)``: per dimension the normal
    log-density where ``low < a < high``, ``log P(x <= low)`` where ``a == low`` and ``log P(x >= high)`` where
    ``a == high``; summed over D."""
    from scipy.special import log_ndtr

    s = np.asarray(sigma, dtype=np.float64)[:, None]  # (N, 1)
    a, mu = np.asarray(action, dtype=np.float64), np.asarray(mean, dtype=np.float64)
    inside = -0.5 * ((a - mu) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)
    at_low = log_ndtr((low - mu) / s)
    at_high = log_ndtr((mu - high) / s)
    per_dim = np.where(a <= low, at_low, np.where(a >= high, at_high, inside))  # (N, D)
    return per_dim.sum(axis=1)
