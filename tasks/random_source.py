"""Random contexts, the Decision-Pretrained Transformer's pretraining data (Lee et al., "Supervised Pretraining Can
Learn In-Context Reinforcement Learning"): each history acts with its own fixed action distribution, drawn
independently of the task, so which actions a history favours says nothing about which action is best.

The engine every family's ``--source random`` shares (bandits, DarkRoom, Key-to-Door):

* the options (:class:`tasks.source_options.RandomOptions`, declared once with the noise source's, light to import)
  and their checks;
* the per-history action distributions (:func:`behaviour_distributions`): with ``--random-policy dirichlet`` (the DPT
  paper's bandit contexts) ``p = (1 - w) * Dirichlet(alpha) + w * one_hot(j)``, ``j`` a uniformly drawn action and
  ``w`` drawn uniformly from ``{0, 0.1, ..., 1} * random_mix``; with ``uniform`` (its DarkRoom contexts) every action
  has probability ``1 / num_actions``;
* acting with them (:func:`sample_actions`): actions by inverse CDF from U(0, 1) draws, with the exact
  log-probability of each taken action (the store's ``logprob``).
"""
from __future__ import annotations

import numpy as np

#: Point-mass weights of the Dirichlet policy are ``random_mix`` times one of these (the DPT paper's grid).
MIX_LEVELS = np.linspace(0.0, 1.0, 11)


def behaviour_distributions(rng: np.random.Generator, count: int, num_actions: int, policy: str = "dirichlet",
                            alpha: float = 1.0, mix: float = 1.0) -> np.ndarray:
    """``count`` action distributions (count, num_actions), one per history (see the module docstring)."""
    if policy == "uniform":
        return np.full((count, num_actions), 1.0 / num_actions)
    probs = rng.dirichlet(np.full(num_actions, float(alpha)), size=count)  # (count, A)
    weight = mix * MIX_LEVELS[rng.integers(0, len(MIX_LEVELS), count)]  # (count,)
    point = np.zeros((count, num_actions))
    point[np.arange(count), rng.integers(0, num_actions, count)] = 1.0
    return (1.0 - weight[:, None]) * probs + weight[:, None] * point


def sample_actions(probs: np.ndarray, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Actions drawn from ``probs`` (N, A) with U(0, 1) ``draws`` (N, ...) by inverse CDF, and the exact
    log-probability of each: both shaped like ``draws``. An action of probability 0 is never drawn."""
    cdf = np.cumsum(probs, axis=1)
    cdf[:, -1] = np.inf  # rounding never runs past the last action
    flat = draws.reshape(len(probs), -1)
    action = np.stack([np.searchsorted(c, d, side="right") for c, d in zip(cdf, flat)]) if len(probs) else \
        np.zeros_like(flat, dtype=np.int64)
    # a zero-probability action shares its CDF value with the one before it: searchsorted(side="right") skips it
    prob = np.take_along_axis(probs, action, axis=1)
    with np.errstate(divide="ignore"):
        return action.reshape(draws.shape), np.log(prob).reshape(draws.shape)
