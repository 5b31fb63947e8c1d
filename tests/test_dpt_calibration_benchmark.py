"""benchmarks/dpt_calibration.py: the exact posterior probability that each arm is the best (what Thompson sampling
pulls with), against Monte Carlo draws from the same Beta posteriors."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.dpt_calibration import compare, posterior_best  # noqa: E402


@pytest.mark.parametrize("successes, failures", [
    ([3, 10, 0, 50, 49], [5, 2, 1, 40, 45]),
    ([300, 10], [100, 2]),
    ([0, 0, 0], [0, 0, 0]),
])
def test_posterior_best_matches_monte_carlo(successes, failures):
    s, f = np.asarray([successes], float), np.asarray([failures], float)
    draws = np.random.default_rng(0).beta(1 + s[:, None, :], 1 + f[:, None, :], size=(1, 200_000, s.shape[1]))
    sampled = np.stack([(draws.argmax(-1) == k).mean(1) for k in range(s.shape[1])], 1)
    exact = posterior_best(s, f)
    assert exact.shape == s.shape and np.allclose(exact.sum(1), 1.0)
    assert np.abs(exact - sampled).max() < 0.006


def test_compare_is_zero_kl_for_the_posterior_itself():
    posterior = posterior_best(np.array([[5.0, 1.0, 2.0]]), np.array([[1.0, 5.0, 2.0]]))
    same = compare(posterior, posterior, np.array([[0.9, 0.1, 0.5]]))
    assert same["kl_posterior_dpt"] == pytest.approx(0.0, abs=1e-12)
    assert same["best_arm_dpt"] == same["best_arm_posterior"] > 0.5
    flat = compare(np.full((1, 3), 1 / 3), posterior, np.array([[0.9, 0.1, 0.5]]))
    assert flat["kl_posterior_dpt"] > 0.1 and flat["entropy_dpt"] == pytest.approx(np.log(3))
