"""Random contexts, the Decision-Pretrained Transformer's pretraining data (Lee et al., "Supervised Pretraining Can
Learn In-Context Reinforcement Learning"): each history acts with its own fixed action distribution, drawn
independently of the task, so which actions a history favours says nothing about which action is best.

The engine every family's ``--source random`` shares (bandits, DarkRoom, Key-to-Door):

* the options (:class:`RandomOptions`, declared once; a family's config takes them with :func:`ad.config.override`)
  and their checks (:func:`check_random_options`);
* the per-history action distributions (:func:`behaviour_distributions`): with ``--random-policy dirichlet`` (the DPT
  paper's bandit contexts) ``p = (1 - w) * Dirichlet(alpha) + w * one_hot(j)``, ``j`` a uniformly drawn action and
  ``w`` drawn uniformly from ``{0, 0.1, ..., 1} * random_mix``; with ``uniform`` (its DarkRoom contexts) every action
  has probability ``1 / num_actions``;
* acting with them (:func:`sample_actions`): actions by inverse CDF from U(0, 1) draws, with the exact
  log-probability of each taken action (the store's ``logprob``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ad.config import option
from ad.errors import UserError

#: Options of the random source (left out of the other sources' dataset metadata, which stays what it was).
RANDOM_OPTIONS = ("random_policy", "random_alpha", "random_mix")
#: Point-mass weights of the Dirichlet policy are ``random_mix`` times one of these (the DPT paper's grid).
MIX_LEVELS = np.linspace(0.0, 1.0, 11)


#: The ``--help`` section of the random source's options.
RANDOM_GROUP = "random source"


@dataclass
class RandomOptions:
    """The random source's options (declared here once; each family's config takes them with ``override``)."""

    random_policy: Literal["dirichlet", "uniform"] = option(
        "dirichlet", "each history's action distribution; dirichlet = (1 - w) * Dirichlet(alpha) + w * a point mass "
                     "on a uniformly drawn action, w drawn per history from {0, 0.1, ..., 1} x --random-mix (the DPT "
                     "paper's bandit contexts); uniform = every action equally likely (its DarkRoom contexts)",
        group=RANDOM_GROUP)
    random_alpha: float = option(1.0, "concentration of the Dirichlet each history's action distribution is drawn "
                                      "from (1 = uniform over distributions)", group=RANDOM_GROUP)
    random_mix: float = option(1.0, "largest weight, in [0, 1], of the point mass mixed into a history's Dirichlet "
                                    "draw (0 = Dirichlet draws only)", group=RANDOM_GROUP)


def check_random_options(cfg: Any) -> None:
    """UserError for a random-source option out of range (NaN and infinities included), naming the option."""
    if cfg.random_policy not in ("dirichlet", "uniform"):
        raise UserError(f"--random-policy must be dirichlet or uniform, got {cfg.random_policy!r}")
    if not 0.0 < cfg.random_alpha < math.inf:
        raise UserError(f"--random-alpha must be positive and finite, got {cfg.random_alpha}")
    if not 0.0 <= cfg.random_mix <= 1.0:
        raise UserError(f"--random-mix must be in [0, 1], got {cfg.random_mix}")


def random_config(cfg: Any) -> dict[str, Any]:
    """The random source's options of ``cfg`` (recorded in the dataset's source config)."""
    return {name: getattr(cfg, name) for name in RANDOM_OPTIONS}


def without_random_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without the random source's (for another source's metadata, unchanged by their addition)."""
    return {k: v for k, v in options.items() if k not in RANDOM_OPTIONS}


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
