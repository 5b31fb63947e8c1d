"""Bandit instances: task names, arm means, the train / held-out split, and the exact optimum and regret.

A task is one instance whose ``arms`` means are drawn from U(0, 1) by a generator keyed by (kind, arms, index), so a
task name (``bandit-bern5-i00123``: Bernoulli, 5 arms, instance 123) always means the same arm means. Its optimal
return is the best arm's mean; the expected regret of pulling arm ``a`` is ``max(means) - means[a]``.
"""
from __future__ import annotations

import re

import numpy as np

from ad.errors import UserError
from ad.families import seeded_split

KINDS = ("bernoulli", "gaussian")
#: What the agent observes before each pull: "last-pull" = the previous pull's outcome (see
#: :func:`pull_observations`), "none" = a constant 0 (a bandit has no state).
OBSERVATIONS = ("last-pull", "none")
#: Short kind names used in task names (path-safe).
SHORT = {"bernoulli": "bern", "gaussian": "gauss"}
_LONG = {v: k for k, v in SHORT.items()}
_TASK_RE = re.compile(r"^bandit-(bern|gauss)(\d+)-i(\d+)$")
#: Most arms a bandit may have (the action embedding and the per-step arrays grow with it).
MAX_ARMS = 128
#: First key of the arm-means generators (keeps them apart from every run seed's streams).
_MEANS_KEY = 0xBA4D17


def check_arms(arms: int) -> None:
    """UserError unless ``arms`` is a usable number of arms (2 .. MAX_ARMS)."""
    if int(arms) < 2:
        raise UserError(f"--arms must be at least 2 (a bandit with {arms} arm(s) has nothing to learn), got {arms}")
    if int(arms) > MAX_ARMS:
        raise UserError(f"--arms must be at most {MAX_ARMS}, got {arms}")


def task_name(kind: str, arms: int, index: int) -> str:
    """``bandit-bern5-i00123`` for a 5-armed Bernoulli bandit, instance 123."""
    return f"bandit-{SHORT[kind]}{int(arms)}-i{int(index):05d}"


def parse_task_name(name: str) -> tuple[str, int, int]:
    """Inverse of :func:`task_name`: ``(kind, arms, index)``."""
    match = _TASK_RE.match(name)
    if match is None:
        raise UserError(f"{name!r} is not a bandit task name; expected e.g. 'bandit-bern5-i00123'")
    short, arms, index = match.groups()
    return _LONG[short], int(arms), int(index)


def arm_means(kind: str, arms: int, index: int) -> np.ndarray:
    """The arm means (arms,) of instance ``index``: U(0, 1) draws from a generator keyed by (kind, arms, index)."""
    rng = np.random.default_rng([_MEANS_KEY, KINDS.index(kind), int(arms), int(index)])
    return rng.uniform(0.0, 1.0, int(arms))


def task_means(names: list[str]) -> np.ndarray:
    """Arm means (tasks, arms) of named tasks (all with the same number of arms)."""
    parsed = [parse_task_name(n) for n in names]
    if len({arms for _, arms, _ in parsed}) > 1:
        raise UserError("bandit tasks with different numbers of arms cannot share one vectorised env")
    return np.stack([arm_means(kind, arms, index) for kind, arms, index in parsed])


def split_instances(n: int, heldout_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Deterministic train / held-out split of instance ids 0..n-1 (:func:`ad.families.seeded_split`)."""
    return seeded_split(n, heldout_fraction, seed)


def optimal_return(means: np.ndarray) -> np.ndarray:
    """Expected reward of the best arm (the optimal return of a one-pull episode): (..., arms) -> (...)."""
    return np.asarray(means).max(axis=-1)


def expected_regret(means: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Per-pull expected regret ``max(means) - means[a_t]``: means (N, arms), actions (N, T) -> (N, T)."""
    means = np.asarray(means, dtype=np.float64)
    chosen = np.take_along_axis(means, np.asarray(actions, dtype=np.int64), axis=1)  # (N, T)
    return means.max(axis=1, keepdims=True) - chosen


def pull_observations(actions: np.ndarray, rewards: np.ndarray, arms: int, kind: str) -> np.ndarray:
    """The "last-pull" observation after each pull, for arms / rewards of any shape (...): Bernoulli, the index
    ``1 + 2 * arm + reward`` (int64, in 1..2 * arms; 0 before the first pull: ``Discrete(2 * arms + 1)``);
    Gaussian, the float32 vector ``[one_hot(arm), reward * one_hot(arm)]`` (..., 2 * arms; zeros before the first
    pull). Pairing arm and reward in one token makes every arm's pull count and reward sum linear in the tokens,
    which a transformer adding separate action and reward embeddings cannot recover (docs/experiments/bandit.md)."""
    actions = np.asarray(actions, dtype=np.int64)
    if kind == "bernoulli":
        return 1 + 2 * actions + (np.asarray(rewards) > 0.5).astype(np.int64)
    one_hot = np.zeros((*actions.shape, arms), dtype=np.float32)
    np.put_along_axis(one_hot, actions[..., None], 1.0, axis=-1)
    return np.concatenate([one_hot, one_hot * np.asarray(rewards, dtype=np.float32)[..., None]], axis=-1)


def random_regret(means: np.ndarray) -> np.ndarray:
    """Exact expected regret per pull of uniformly random pulls: ``max(means) - mean(means)``, per instance."""
    means = np.asarray(means, dtype=np.float64)
    return means.max(axis=-1) - means.mean(axis=-1)
