"""Source algorithms of the bandit histories, vectorised over thousands of instances at once (numpy).

* :class:`UCB1` (Auer et al. 2002): every arm once, then the largest ``mean_j + c * scale * sqrt(2 ln n / n_j)``
  (``scale`` 1 for rewards in [0, 1], the noise std for Gaussian rewards; ties go to the lowest arm); logprob 0.
* :class:`Thompson` sampling: a Beta(1, 1) prior per arm (Bernoulli) or N(0.5, 1) (Gaussian, known noise std);
  each pull takes the largest posterior sample. Its logprob has no closed form and is stored as NaN.

Every per-step draw is one vectorised call on one generator, so :func:`run_source` equals a per-instance loop of
scalar draws made in the same order (``tests/test_bandit_algorithms.py``).
"""
from __future__ import annotations

import numpy as np

#: Prior of Gaussian Thompson sampling: N(mean, std^2) per arm (arm means are drawn from U(0, 1)).
GAUSSIAN_PRIOR = (0.5, 1.0)
SOURCES = ("thompson", "ucb")


class BanditAlgorithm:
    """Per-arm pull counts and reward sums of N instances with ``arms`` arms."""

    def __init__(self, n: int, arms: int):
        self.counts = np.zeros((n, arms), dtype=np.int64)  # (N, arms)
        self.sums = np.zeros((n, arms), dtype=np.float64)  # (N, arms)

    def select(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Arms to pull (N,) and the log-probability of each choice (N,)."""
        raise NotImplementedError

    def update(self, actions: np.ndarray, rewards: np.ndarray) -> None:
        """Record one pull (N,) and its reward (N,) per instance."""
        rows = np.arange(len(actions))
        self.counts[rows, actions] += 1
        self.sums[rows, actions] += rewards


class UCB1(BanditAlgorithm):
    """UCB1 with exploration coefficient ``c`` and reward scale ``scale``."""

    def __init__(self, n: int, arms: int, c: float = 1.0, scale: float = 1.0):
        super().__init__(n, arms)
        self.c, self.scale = float(c), float(scale)

    def select(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        untried = self.counts == 0  # (N, arms)
        n = self.counts.sum(axis=1, keepdims=True)  # (N, 1) pulls so far
        with np.errstate(divide="ignore", invalid="ignore"):
            index = self.sums / self.counts + self.c * self.scale * np.sqrt(2.0 * np.log(np.maximum(n, 1))
                                                                           / self.counts)  # (N, arms)
        index = np.where(untried, -np.inf, index)
        actions = np.where(untried.any(axis=1), untried.argmax(axis=1), index.argmax(axis=1))  # (N,)
        return actions, np.zeros(len(actions))


class Thompson(BanditAlgorithm):
    """Thompson sampling with conjugate priors (Beta for Bernoulli rewards, normal for Gaussian ones)."""

    def __init__(self, n: int, arms: int, kind: str = "bernoulli", noise_std: float = 0.5):
        super().__init__(n, arms)
        self.kind, self.noise_std = kind, float(noise_std)

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Bernoulli: (alpha, beta) of the Beta posteriors; Gaussian: (mean, std) of the normal ones. (N, arms) each."""
        if self.kind == "bernoulli":
            return 1.0 + self.sums, 1.0 + self.counts - self.sums
        m0, s0 = GAUSSIAN_PRIOR
        precision = 1.0 / s0**2 + self.counts / self.noise_std**2  # (N, arms)
        mean = (m0 / s0**2 + self.sums / self.noise_std**2) / precision
        return mean, 1.0 / np.sqrt(precision)

    def select(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.posterior()
        samples = rng.beta(a, b) if self.kind == "bernoulli" else a + b * rng.standard_normal(a.shape)  # (N, arms)
        actions = samples.argmax(axis=1)
        return actions, np.full(len(actions), np.nan)


def make_algorithm(source: str, n: int, arms: int, kind: str, noise_std: float = 0.5,
                   ucb_c: float = 1.0) -> BanditAlgorithm:
    """The source algorithm ``source`` ("thompson" or "ucb") for N instances."""
    if source == "thompson":
        return Thompson(n, arms, kind, noise_std)
    if source == "ucb":
        return UCB1(n, arms, c=ucb_c, scale=1.0 if kind == "bernoulli" else noise_std)
    raise ValueError(f"unknown source algorithm {source!r}; choose one of {SOURCES}")


def draw_rewards(rng: np.random.Generator, kind: str, means: np.ndarray, noise_std: float) -> np.ndarray:
    """One reward per instance for pulls whose arms have ``means`` (N,): Bernoulli or mean + Gaussian noise."""
    if kind == "bernoulli":
        return (rng.random(len(means)) < means).astype(np.float64)
    return means + noise_std * rng.standard_normal(len(means))


def run_source(source: str, kind: str, means: np.ndarray, pulls: int, rng: np.random.Generator,
               noise_std: float = 0.5, ucb_c: float = 1.0) -> dict[str, np.ndarray]:
    """Run ``source`` for ``pulls`` pulls on every instance of ``means`` (N, arms) at once: ``action`` (N, pulls)
    int64, ``reward`` and ``logprob`` (N, pulls) float64."""
    means = np.asarray(means, dtype=np.float64)
    n, arms = means.shape
    algo = make_algorithm(source, n, arms, kind, noise_std, ucb_c)
    actions = np.zeros((n, pulls), dtype=np.int64)
    rewards = np.zeros((n, pulls), dtype=np.float64)
    logprobs = np.zeros((n, pulls), dtype=np.float64)
    rows = np.arange(n)
    for t in range(pulls):
        a, logp = algo.select(rng)
        r = draw_rewards(rng, kind, means[rows, a], noise_std)
        algo.update(a, r)
        actions[:, t], rewards[:, t], logprobs[:, t] = a, r, logp
    return {"action": actions, "reward": rewards, "logprob": logprobs}


class VectorPolicy:
    """A source algorithm as an in-context policy of :func:`ad.evaluate.run_in_context` (it learns from the
    previous action and reward it is shown, like the transformer); for baselines on the evaluation envs."""

    def __init__(self, source: str, arms: int, kind: str, noise_std: float = 0.5, ucb_c: float = 1.0, seed: int = 0):
        self.source, self.arms, self.kind, self.noise_std, self.ucb_c = source, arms, kind, noise_std, ucb_c
        self.rng = np.random.default_rng(seed)
        self.algo: BanditAlgorithm | None = None

    def reset(self, num_envs: int) -> None:
        self.algo = make_algorithm(self.source, num_envs, self.arms, self.kind, self.noise_std, self.ucb_c)

    def act(self, obs, prev_action, prev_reward, timestep, first):
        if not bool(np.asarray(first).all()):  # the previous pull's outcome (none before the first pull)
            self.algo.update(np.asarray(prev_action, dtype=np.int64), np.asarray(prev_reward, dtype=np.float64))
        return self.algo.select(self.rng)[0]
