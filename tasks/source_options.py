"""The options of the sources every in-context family shares: noise distillation (``--source noise``, its engine
:mod:`tasks.noise`), random contexts (``--source random``, :mod:`tasks.random_source`) and the grid rooms'
nearest-unvisited explorer (``--source explorer``, :mod:`tasks.grid.explorer`).

Declared here once, and light to import: a family's config takes them with :func:`ad.config.override` and checks
them with :func:`check_noise_options`, :func:`check_random_options` and :func:`check_explorer_options`, without
loading any engine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from ad.config import option
from ad.errors import UserError

#: Options of the noise source (left out of the other sources' dataset metadata, which stays what it was).
NOISE_OPTIONS = ("noise_start", "noise_end", "noise_decay_fraction", "noise_power", "max_return_fraction")
#: Options of the random source (left out of the other sources' dataset metadata, which stays what it was).
RANDOM_OPTIONS = ("random_policy", "random_alpha", "random_mix")


#: The ``--help`` section of the noise source's options.
NOISE_GROUP = "noise source"


@dataclass
class NoiseOptions:
    """The noise source's options (declared here once; each family's config takes them with ``override``)."""

    noise_start: float = option(1.0, "epsilon (probability of a uniformly random action instead of the "
                                     "demonstrator's) of each history's first episode; 1 = a random policy (the "
                                     "paper's start)", group=NOISE_GROUP)
    noise_end: float = option(0.0, "epsilon the schedule reaches at the end of its decay; 0 = the demonstrator "
                                   "itself (the paper's end)", group=NOISE_GROUP)
    noise_decay_fraction: float = option(1.0, "fraction of each history (its episodes) over which epsilon falls "
                                              "from --noise-start to --noise-end, then stays; 1 = the whole history",
                                         group=NOISE_GROUP)
    noise_power: float = option(1.0, "shape of the decay, epsilon = end + (start - end) * (1 - progress)^power; 1 = "
                                     "linear (the paper's), > 1 falls faster early", group=NOISE_GROUP)
    max_return_fraction: float = option(1.0, "cap on the data's best expected episode return, as a fraction of each "
                                             "task's optimum, in (0, 1]: epsilon never falls below the level whose "
                                             "exact expected return is this fraction; 1 = no cap", group=NOISE_GROUP)


def check_noise_options(cfg: Any) -> None:
    """UserError for a noise option out of range (NaN and infinities included), naming the option."""
    for name in ("noise_start", "noise_end"):
        value = getattr(cfg, name)
        if not 0.0 <= value <= 1.0:  # also refuses NaN
            raise UserError(f"--{name.replace('_', '-')} must be an epsilon in [0, 1], got {value}")
    if cfg.noise_end > cfg.noise_start:
        raise UserError(f"--noise-end ({cfg.noise_end}) must not exceed --noise-start ({cfg.noise_start}): the noise "
                        "falls over a history")
    if not 0.0 < cfg.noise_decay_fraction <= 1.0:
        raise UserError(f"--noise-decay-fraction must be in (0, 1], got {cfg.noise_decay_fraction}")
    if not 0.0 < cfg.noise_power < math.inf:
        raise UserError(f"--noise-power must be positive and finite, got {cfg.noise_power}")
    if not 0.0 < cfg.max_return_fraction <= 1.0:
        raise UserError(f"--max-return-fraction must be in (0, 1] (1 = no cap), got {cfg.max_return_fraction}")


def noise_config(cfg: Any) -> dict[str, float]:
    """The schedule's options of ``cfg`` (recorded in the dataset's source config)."""
    return {name: getattr(cfg, name) for name in NOISE_OPTIONS}


def without_noise_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without the noise source's (for another source's metadata, unchanged by their addition)."""
    return {k: v for k, v in options.items() if k not in NOISE_OPTIONS}


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


#: Options of the explorer source (left out of the other sources' dataset metadata, which stays what it was).
EXPLORER_OPTIONS = ("epsilon", "epsilon_after_goal")
#: The ``--help`` section of the explorer source's options.
EXPLORER_GROUP = "explorer source"


@dataclass
class ExplorerOptions:
    """The grid explorer's options (declared here once; a grid family's config inherits them)."""

    epsilon: float = option(0.1, "probability of a uniformly random action while the cell the explorer looks for "
                                 "(the goal; Key-to-Door's key, then its door) is unknown", group=EXPLORER_GROUP)
    epsilon_after_goal: float = option(0.02, "the same once that cell is known", group=EXPLORER_GROUP)


def check_explorer_options(cfg: Any) -> None:
    """UserError for an explorer option out of range (NaN included), naming the options."""
    if not (0.0 <= cfg.epsilon <= 1.0 and 0.0 <= cfg.epsilon_after_goal <= 1.0):  # also refuses NaN
        raise UserError(f"--epsilon and --epsilon-after-goal must be in [0, 1], got {cfg.epsilon} and "
                        f"{cfg.epsilon_after_goal}")


def without_explorer_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without the explorer's (for another source's metadata, unchanged by their addition)."""
    return {k: v for k, v in options.items() if k not in EXPLORER_OPTIONS}
