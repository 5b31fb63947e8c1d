"""Noise distillation (AD-epsilon): an optimal demonstrator made epsilon-greedy, with an epsilon that falls over each
learning history, so a history looks like a learning run without any RL (Zisman et al., "Emergence of in-context
reinforcement learning from noise distillation").

The engine every family's ``--source noise`` shares (DarkRoom, Key-to-Door, bandits):

* the options (:class:`tasks.source_options.NoiseOptions`, declared once with the random source's, light to import)
  and their checks;
* the schedule (:func:`epsilon_schedule`): one noise level per episode of a stream, from ``noise_start`` down to
  ``noise_end`` over the first ``noise_decay_fraction`` of the history (linear for ``noise_power`` 1, the paper's
  curriculum from a random policy to the demonstrator), never below a per-task floor;
* the floor that caps the data's best expected return (:func:`epsilon_floor`): the smallest epsilon whose expected
  return is at most ``max_return_fraction`` of the task's optimum, found by bisection on the exact expected return;
* the exact expected return of the epsilon-greedy demonstrator in a tabular task (:func:`expected_return`: finite-
  horizon policy evaluation, vectorised over tasks and epsilons);
* epsilon-greedy acting with the exact log-probability of the taken action (:func:`epsilon_greedy`);
* the best-return record of a task's histories (:func:`return_record`), stored in each unit's info in dataset.json.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ad.errors import UserError

#: Bisection steps of :func:`epsilon_floor` (epsilon to within 2^-30).
_BISECTIONS = 30
#: Slack of the cap check for float rounding in the expected returns.
_TOLERANCE = 1e-9


def epsilon_schedule(levels: int, start: float = 1.0, end: float = 0.0, decay_fraction: float = 1.0,
                     power: float = 1.0, floor: np.ndarray | float = 0.0) -> np.ndarray:
    """Epsilon of each of ``levels`` noise levels (a stream's episodes), per floor: ``(*floor.shape, levels)``.

    Level ``k`` has progress ``p = min(1, k / ((levels - 1) * decay_fraction))`` and epsilon
    ``max(floor, end + (start - end) * (1 - p) ** power)``: ``start`` at the first level, ``end`` from the end of the
    decay on, non-increasing in between.
    """
    k = np.arange(levels, dtype=np.float64)
    span = max((levels - 1) * decay_fraction, 1e-12)
    progress = np.minimum(1.0, k / span) if levels > 1 else np.zeros(1)
    eps = end + (start - end) * (1.0 - progress) ** power  # (levels,)
    floor = np.asarray(floor, dtype=np.float64)
    return np.maximum(eps, floor[..., None])  # (..., levels)


def epsilon_greedy(greedy: np.ndarray, eps: np.ndarray, explore_draw: np.ndarray, random_action: np.ndarray,
                   num_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """Epsilon-greedy actions and their exact log-probabilities, elementwise over any shape.

    ``explore_draw`` are U(0, 1) draws (explore where ``< eps``), ``random_action`` uniform actions; the taken
    action's probability is ``(1 - eps) * [action == greedy] + eps / num_actions``.
    """
    action = np.where(explore_draw < eps, random_action, greedy)
    prob = (1.0 - eps) * (action == greedy) + eps / num_actions
    with np.errstate(divide="ignore"):
        return action, np.log(prob)


@dataclass(frozen=True)
class TabularTasks:
    """Tasks as tabular finite-horizon MDPs, for the exact expected return of an epsilon-greedy demonstrator.

    Shapes: ``next_state`` (T, O, A) int, ``reward`` (T, O, A) float, ``done`` (T, O, A) bool (no reward after it),
    ``start`` (T, O) start-state distribution, ``greedy`` (T, O) the demonstrator's action; ``horizon`` steps.
    """

    next_state: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    start: np.ndarray
    greedy: np.ndarray
    horizon: int


def expected_return(mdp: TabularTasks, eps: np.ndarray) -> np.ndarray:
    """Exact expected episode return (T,) of each task's demonstrator made epsilon-greedy with ``eps`` (T,)."""
    T, O, A = mdp.reward.shape
    eps = np.broadcast_to(np.asarray(eps, dtype=np.float64), (T,))
    policy = np.broadcast_to(eps[:, None, None] / A, (T, O, A)).copy()  # (T, O, A) action probabilities
    np.put_along_axis(policy, mdp.greedy[..., None], (1.0 - eps[:, None, None] + eps[:, None, None] / A), axis=2)
    keep = ~mdp.done
    rows = np.arange(T)[:, None, None]
    value = np.zeros((T, O))  # value with 0 steps left
    for _ in range(mdp.horizon):
        value = (policy * (mdp.reward + keep * value[rows, mdp.next_state])).sum(axis=2)  # (T, O)
    return (mdp.start * value).sum(axis=1)


def epsilon_floor(returns: Callable[[np.ndarray], np.ndarray], optimum: np.ndarray, fraction: float,
                  names: list[str]) -> np.ndarray:
    """Per task, the smallest epsilon whose expected return ``returns(eps)`` (T,) is at most ``fraction`` of
    ``optimum`` (T,): 0 where even the demonstrator is within the cap (``fraction`` 1). UserError naming a task where
    uniformly random actions (epsilon 1) already exceed the cap."""
    optimum = np.asarray(optimum, dtype=np.float64)
    cap = fraction * optimum + _TOLERANCE
    if fraction >= 1.0:
        return np.zeros(len(optimum))
    random = returns(np.ones(len(optimum)))
    over = np.flatnonzero(random > cap)
    if len(over):
        worst = over[np.argmax(random[over] / np.maximum(optimum[over], 1e-12))]
        need = float(np.max(random / np.where(optimum > 0, optimum, np.inf)))
        raise UserError(f"--max-return-fraction {fraction}: uniformly random actions already get "
                        f"{random[worst] / optimum[worst]:.3f} of the optimum on {names[worst]} ({len(over)} task(s) "
                        f"above the cap), so no noise level meets it; pass --max-return-fraction "
                        f"{math.ceil(need * 1000) / 1000} or more (or 1 for no cap)")
    lo, hi = np.zeros(len(optimum)), np.ones(len(optimum))  # returns(hi) <= cap throughout
    lo_ok = returns(lo) <= cap
    hi[lo_ok] = 0.0
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        ok = returns(mid) <= cap
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return hi


def return_record(returns: np.ndarray, eps: np.ndarray, optimum: float) -> dict[str, Any]:
    """What a unit's info records of its histories' episode returns (streams, episodes) played at noise levels
    ``eps`` (episodes,): the best episode, the mean at the lowest noise level (the best policy in the data, measured),
    the first episodes' mean, each also as a fraction of ``optimum``."""
    lowest = eps <= eps.min() + 1e-12  # (episodes,)
    best, floor_mean, first = float(returns.max()), float(returns[:, lowest].mean()), float(returns[:, 0].mean())

    def frac(x: float) -> float | None:
        return x / optimum if optimum > 0 else None

    return {"optimal_return": optimum, "best_episode_return": best, "best_episode_fraction": frac(best),
            "lowest_noise_epsilon": float(eps.min()), "lowest_noise_episodes": int(lowest.sum()),
            "lowest_noise_mean_return": floor_mean, "lowest_noise_mean_fraction": frac(floor_mean),
            "first_episode_mean_return": first, "first_episode_mean_fraction": frac(first)}


def summarize_records(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Dataset-level figures over units' return records (summary.json): means of the fractions, the highest ones."""
    def values(key: str) -> np.ndarray:
        return np.array([r[key] for r in records if r.get(key) is not None], dtype=np.float64)

    out: dict[str, Any] = {"tasks": len(records)}
    for key in ("lowest_noise_mean_fraction", "best_episode_fraction", "first_episode_mean_fraction",
                "expected_best_fraction"):
        v = values(key)
        out[f"mean_{key}"] = float(v.mean()) if len(v) else None
        out[f"max_{key}"] = float(v.max()) if len(v) else None
    return out
