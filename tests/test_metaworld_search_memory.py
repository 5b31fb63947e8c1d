"""benchmarks/metaworld_search_memory.py: where the search source returns, with each --search-memory."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.metaworld_search_memory import kept_distances  # noqa: E402


def test_kept_distances_are_measured_from_the_fingertips_at_every_episode_start():
    runs = {m: kept_distances(m, 0, "0-3", episodes=4, episode_length=80) for m in ("first", "mean")}
    for run in runs.values():
        assert run["distance"].shape == (4, 3) and run["success"].shape == (4, 4)
        assert np.isfinite(run["distance"]).all()
        found = run["success"][:, :-1].any(axis=1)  # succeeded before the last episode started
        # kept a position inside the success ball (the hand-to-fingertips offset, taken at the episode's start,
        # moves by a fraction of a millimetre as the arm moves)
        assert (run["distance"][found, -1] <= 0.05 + 0.002).all()
    # the same seeds: identical until a unit first earns the saturated reward twice; then mean keeps it deeper inside
    np.testing.assert_array_equal(runs["first"]["success"][:, 0], runs["mean"]["success"][:, 0])
    assert np.median(runs["mean"]["distance"][:, -1]) < np.median(runs["first"]["distance"][:, -1]) - 0.01


@pytest.mark.parametrize("argv, message", [
    (["--episodes", "1"], "--episodes must be at least 2"),
    (["--goals", "0-60"], "goal"),
])
def test_bad_options_end_with_one_error_line(argv, message, tmp_path, capsys, monkeypatch):
    from benchmarks import metaworld_search_memory
    from cli_run import script_error

    monkeypatch.chdir(tmp_path)
    assert message in script_error(capsys, monkeypatch, metaworld_search_memory.main, "metaworld_search_memory.py",
                                   *argv)
