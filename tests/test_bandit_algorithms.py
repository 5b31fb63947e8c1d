"""UCB1 and Thompson sampling: the vectorised implementations equal per-instance loops of scalar code, and
their regret is where bandit theory puts it (Thompson < UCB1 << random)."""
import math

import numpy as np
import pytest

from tasks.bandit.algorithms import GAUSSIAN_PRIOR, VectorPolicy, run_source
from tasks.bandit.instances import expected_regret, random_regret


def _ucb_reference(means, pulls, rng, kind, noise_std, c):
    """UCB1, one instance at a time inside each pull (scalar Python), drawing rewards in the vectorised order."""
    n, arms = means.shape
    counts = [[0] * arms for _ in range(n)]
    sums = [[0.0] * arms for _ in range(n)]
    scale = 1.0 if kind == "bernoulli" else noise_std
    actions = np.zeros((n, pulls), dtype=np.int64)
    for t in range(pulls):
        chosen = []
        for i in range(n):
            untried = [j for j in range(arms) if counts[i][j] == 0]
            if untried:
                chosen.append(untried[0])
                continue
            total = sum(counts[i])
            best, best_value = 0, -math.inf
            for j in range(arms):
                value = sums[i][j] / counts[i][j] + c * scale * math.sqrt(2 * math.log(total) / counts[i][j])
                if value > best_value:
                    best, best_value = j, value
            chosen.append(best)
        for i in range(n):  # rewards: one draw per instance, after the choices
            a = chosen[i]
            u = rng.random() if kind == "bernoulli" else rng.standard_normal()
            r = float(u < means[i, a]) if kind == "bernoulli" else means[i, a] + noise_std * u
            counts[i][a] += 1
            sums[i][a] += r
            actions[i, t] = a
    return actions


def _thompson_reference(means, pulls, rng, kind, noise_std):
    """Thompson sampling, one instance and one arm at a time (scalar draws in the vectorised order)."""
    n, arms = means.shape
    counts = np.zeros((n, arms))
    sums = np.zeros((n, arms))
    m0, s0 = GAUSSIAN_PRIOR
    actions = np.zeros((n, pulls), dtype=np.int64)
    for t in range(pulls):
        chosen = []
        for i in range(n):
            samples = []
            for j in range(arms):
                if kind == "bernoulli":
                    samples.append(rng.beta(1 + sums[i, j], 1 + counts[i, j] - sums[i, j]))
                else:
                    precision = 1 / s0**2 + counts[i, j] / noise_std**2
                    mean = (m0 / s0**2 + sums[i, j] / noise_std**2) / precision
                    samples.append(mean + rng.standard_normal() / math.sqrt(precision))
            chosen.append(int(np.argmax(samples)))
        for i in range(n):
            a = chosen[i]
            u = rng.random() if kind == "bernoulli" else rng.standard_normal()
            r = float(u < means[i, a]) if kind == "bernoulli" else means[i, a] + noise_std * u
            counts[i, a] += 1
            sums[i, a] += r
            actions[i, t] = a
    return actions


@pytest.mark.parametrize("kind", ["bernoulli", "gaussian"])
@pytest.mark.parametrize("source", ["ucb", "thompson"])
def test_vectorised_source_equals_a_per_instance_loop(kind, source):
    means = np.random.default_rng(3).uniform(0, 1, (6, 4))
    got = run_source(source, kind, means, 60, np.random.default_rng(7), noise_std=0.4, ucb_c=0.7)
    if source == "ucb":
        want = _ucb_reference(means, 60, np.random.default_rng(7), kind, 0.4, 0.7)
        np.testing.assert_array_equal(got["logprob"], 0.0)
        np.testing.assert_array_equal(got["action"][:, :4], np.tile(np.arange(4), (6, 1)))  # each arm once first
    else:
        want = _thompson_reference(means, 60, np.random.default_rng(7), kind, 0.4)
        assert np.isnan(got["logprob"]).all()  # the probability of a Thompson choice has no closed form
    np.testing.assert_array_equal(got["action"], want)
    if kind == "bernoulli":
        assert set(np.unique(got["reward"])) <= {0.0, 1.0}


@pytest.mark.parametrize("kind", ["bernoulli", "gaussian"])
def test_regret_orders_thompson_below_ucb_below_random(kind):
    means = np.random.default_rng(0).uniform(0, 1, (400, 5))
    regret = {s: expected_regret(means, run_source(s, kind, means, 500, np.random.default_rng(1))["action"]
                                 ).sum(1).mean() for s in ("thompson", "ucb")}
    rand = 500 * random_regret(means).mean()
    assert regret["thompson"] < regret["ucb"] < 0.5 * rand
    assert regret["thompson"] < 0.15 * rand


def test_source_as_an_in_context_policy_matches_run_source_choices():
    """VectorPolicy (baselines on the eval env) learns from the (action, reward) it is shown, like run_source."""
    means = np.random.default_rng(4).uniform(0, 1, (5, 3))
    policy = VectorPolicy("ucb", 3, "bernoulli")
    policy.reset(5)
    hist = run_source("ucb", "bernoulli", means, 40, np.random.default_rng(9))
    prev_a, prev_r = np.zeros(5, np.int64), np.zeros(5)
    for t in range(40):
        a = policy.act(None, prev_a, prev_r, np.zeros(5), np.full(5, t == 0))
        np.testing.assert_array_equal(a, hist["action"][:, t])
        prev_a, prev_r = a, hist["reward"][:, t]
