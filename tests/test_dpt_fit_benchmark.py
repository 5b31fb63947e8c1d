"""benchmarks/dpt_fit.py: DPT's and the exact posterior's likelihood of the best arm on a context, pull by pull, with
the posterior at each pull built from the pulls before it (the token at pull t holds pull t - 1)."""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.dpt_calibration import posterior_best  # noqa: E402
from benchmarks.dpt_fit import likelihoods, summarise  # noqa: E402


class FixedLogits:
    """A stand-in model whose action logits are given."""

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    def __call__(self, states, actions, rewards, timesteps):
        return {"action": self.logits}


def batch(actions, rewards, best):
    a = torch.tensor([actions])
    return {"states": torch.zeros_like(a), "actions": a, "rewards": torch.tensor([rewards], dtype=torch.float32),
            "timesteps": torch.zeros_like(a), "action_targets": torch.full_like(a, best)}


def test_the_posterior_at_each_pull_counts_only_the_pulls_before_it():
    b = batch([0, 0, 1, 0], [1, 1, 0, 1], best=0)
    uniform = FixedLogits(torch.zeros(1, 4, 3))
    got = likelihoods(uniform, b)
    expected = [posterior_best(np.array([s]), np.array([f]))[0, 0] for s, f in
                [([0, 0, 0], [0, 0, 0]), ([1, 0, 0], [0, 0, 0]), ([2, 0, 0], [0, 0, 0]), ([2, 0, 0], [0, 1, 0])]]
    assert np.allclose(np.exp(got["posterior"][0]), expected)
    assert np.allclose(got["dpt"], np.log(1 / 3))
    assert got["kl"][0, 0] == pytest.approx(0.0, abs=1e-6)  # before any pull the posterior is uniform too
    assert (got["kl"][0, 1:] > 0).all()


def test_a_model_that_predicts_the_posterior_matches_it():
    rng = np.random.default_rng(0)
    actions, rewards = rng.integers(0, 5, 60).tolist(), rng.integers(0, 2, 60).tolist()
    b = batch(actions, rewards, best=2)
    exact = likelihoods(FixedLogits(torch.zeros(1, 60, 5)), b)
    onehot = np.eye(5)[actions]
    wins = np.vstack([np.zeros(5), np.cumsum(onehot * np.array(rewards)[:, None], 0)[:-1]])
    losses = np.vstack([np.zeros(5), np.cumsum(onehot * (1 - np.array(rewards))[:, None], 0)[:-1]])
    posterior = torch.as_tensor(np.log(posterior_best(wins, losses)))[None].float()
    same = summarise(likelihoods(FixedLogits(posterior), b))
    assert list(same) == ["1-10", "11-50", "51-150"]  # ranges past the context's 60 pulls are left out
    for row in same.values():
        assert row["kl_posterior_dpt"] == pytest.approx(0.0, abs=1e-5)
        assert row["nll_dpt"] == pytest.approx(row["nll_posterior"], abs=1e-4)
    assert summarise(exact)["1-10"]["nll_dpt"] == pytest.approx(np.log(5), abs=1e-4)  # rounded to 4 places
