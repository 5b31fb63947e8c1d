"""benchmarks/dpt_calibration_rooms.py: the cells the hidden cell may still be at each step of the search phase, and
the optimal-action posterior they give, against the shortest-path rule written out by hand."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.dpt_calibration_rooms import action_marginal, hidden_cell, hidden_phase  # noqa: E402


def by_hand(size, target, cell):
    """Rows first, then columns (noop 0, up 1, right 2, down 3, left 4)."""
    (tr, tc), (r, c) = divmod(target, size), divmod(cell, size)
    return 1 if tr < r else 3 if tr > r else 4 if tc < c else 2 if tc > c else 0


@pytest.mark.parametrize("seed", range(5))
def test_action_marginal_is_the_share_of_cells_per_shortest_path_action(seed):
    rng = np.random.default_rng(seed)
    cells = rng.choice(81, size=int(rng.integers(1, 81)), replace=False)
    at = int(rng.integers(0, 81))
    expected = np.bincount([by_hand(9, int(c), at) for c in cells], minlength=5) / len(cells)
    np.testing.assert_allclose(action_marginal(9, cells, at, 5), expected)


def columns(states, rewards, episodes=None):
    n = len(states)
    return {"state": np.array(states), "reward": np.array(rewards, float),
            "episode": np.array(episodes if episodes is not None else [0] * n)}


def test_keydoor_phase_runs_from_the_key_to_the_door_and_drops_searched_cells():
    # 3x3 room, key (0, 0) = cell 0, door (2, 2) = cell 8: up, left onto the key, then down, down, right, right
    phase = hidden_phase("keydoor", "keydoor3-k0-0-d2-2",
                         columns([4, 1, 0, 3, 6, 7, 4], [0, 1, 0, 0, 0, 1, 0], [0] * 6 + [1]))
    assert hidden_cell("keydoor", "keydoor3-k0-0-d2-2") == (3, 8, {0})
    assert [row for row, _ in phase] == [2, 3, 4, 5]  # acted from the key's cell on; the second episode not read
    assert [set(may.tolist()) for _, may in phase] == [{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 4, 5, 6, 7, 8},
                                                      {1, 2, 4, 5, 7, 8}, {1, 2, 4, 5, 8}]
    assert hidden_phase("keydoor", "keydoor3-k0-0-d2-2", columns([4, 5, 4], [0, 0, 0])) == []  # no key taken


def test_darkroom_phase_ends_when_the_goal_is_reached():
    phase = hidden_phase("darkroom", "darkroom3-g0-0", columns([4, 1, 0, 0], [0, 1, 1, 1]))
    assert hidden_cell("darkroom", "darkroom3-g0-0") == (3, 0, set())
    assert [(row, set(may.tolist())) for row, may in phase] == [(0, {0, 1, 2, 3, 5, 6, 7, 8}),
                                                                (1, {0, 2, 3, 5, 6, 7, 8})]
