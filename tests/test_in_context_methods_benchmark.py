"""The in-context-methods benchmark's Key-to-Door figures, on eval.json returns made up so every share is known."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.in_context_methods import keydoor_outcome_figures  # noqa: E402


def run_of(returns: np.ndarray) -> dict:
    """An eval.json of one policy (DPT) with these (tasks, seeds, episodes) returns; the optimum is 2."""
    return {"optimal_mean_return": 2.0, "policies": {"DPT": {"returns": returns.tolist()}}}


def test_keydoor_outcome_figures_count_finds_repeats_and_stuck_episodes():
    returns = np.zeros((2, 1, 40))
    returns[0, 0, 10:] = 2  # found the door in episode 11 and kept it: both rewards from there on
    returns[1, 0, :] = 1  # the key only, every episode
    returns[1, 0, 37] = 2  # one find, in episode 38: after it, back to the key only
    other = np.full((2, 1, 40), 2.0)  # every episode optimal
    figures = keydoor_outcome_figures([0, 1], [run_of(returns), run_of(other)], ["DPT"], "test")
    values = {f["figure"].split(" (")[0]: [row["ours"] for row in f["per_seed"]] for f in figures}
    assert values["DPT: share of episodes 36-40 that collect both rewards"] == [pytest.approx(6 / 10), 1.0]
    assert values["DPT: share of runs that collected both rewards in an episode up to the 35th"] == [0.5, 1.0]
    # after an episode with both: task 0's 29 (episodes 11-39) all repeated, task 1's one find followed by the key only
    assert values["DPT: share of episodes after one with both rewards that collect both again"] == [
        pytest.approx(29 / 30), 1.0]
    # after the key only (run 1): 38 such episodes with a successor, 37 followed by the key only again
    stuck = values["DPT: share of episodes after one with the key's reward only that again collect the key's only"]
    assert stuck == [pytest.approx(37 / 38), None]  # no such episode at all: no share
    assert [f["ours"] for f in figures if f["figure"].startswith("DPT: share of episodes after one with the key")] == [
        pytest.approx(37 / 38)]  # the mean over the seeds that have one
    assert keydoor_outcome_figures([0], [run_of(np.zeros((2, 1, 30)))], ["DPT"], "test") == []  # under 40 episodes
