"""benchmarks/dpt_calibration_rooms.py: the cells the hidden cell may still be at each step of the search phase (given
the context window the evaluation acts from), and the optimal-action posterior they give, against the shortest-path
rule written out by hand."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.dpt_calibration_rooms import action_marginal, hidden_cell, search_steps, window_start  # noqa: E402


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
    phase = search_steps("keydoor", "keydoor3-k0-0-d2-2",
                         columns([4, 1, 0, 3, 6, 7, 4], [0, 1, 0, 0, 0, 1, 0], [0] * 6 + [1]), context=100)
    assert hidden_cell("keydoor", "keydoor3-k0-0-d2-2") == (3, 8, {0})
    assert [s.row for s in phase] == [2, 3, 4, 5]  # acted from the key's cell on; the second episode not read
    assert [set(s.may.tolist()) for s in phase] == [{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 4, 5, 6, 7, 8},
                                                    {1, 2, 4, 5, 7, 8}, {1, 2, 4, 5, 8}]
    assert all(np.array_equal(s.may, s.may_in_episode) for s in phase)  # one episode: the same posterior
    assert [set(s.prior.tolist()) for s in phase][-1] == {1, 2, 3, 4, 5, 6, 8}  # the cell-only prior: all but the
    # key, the phase's first cell (the key's) and the step's own cell (7)
    assert search_steps("keydoor", "keydoor3-k0-0-d2-2", columns([4, 5, 4], [0, 0, 0]), context=100) == []


def test_darkroom_phase_ends_when_the_goal_is_reached():
    phase = search_steps("darkroom", "darkroom3-g0-0", columns([4, 1, 0, 0], [0, 1, 1, 1]), context=100)
    assert hidden_cell("darkroom", "darkroom3-g0-0") == (3, 0, set())
    assert [(s.row, set(s.may.tolist())) for s in phase if s.may is not None] == [(0, {0, 1, 2, 3, 5, 6, 7, 8}),
                                                                                  (1, {0, 2, 3, 5, 6, 7, 8})]


@pytest.mark.parametrize("context", [2, 4, 6, 400])
def test_window_start_is_where_the_evaluations_window_begins(context):
    """The first row of ``models.rl.policy.ContextWindow`` after each pushed state (the window keeps its newest half
    when full)."""
    from types import SimpleNamespace

    from models.rl.policy import ContextWindow

    window = ContextWindow(SimpleNamespace(config=SimpleNamespace(context=context, num_states=10 ** 4, action_dim=0)),
                           num_envs=1)
    for row in range(3 * context + 3):
        window.push(row, 0, 0.0, 0, first=row == 0)
        assert window_start(row, context) == int(window.states[0, 0])


def test_later_episodes_exclude_the_cells_searched_earlier_in_the_window_and_know_a_door_it_shows():
    # 3x3 room, key at the start cell's neighbour 1, door at 8. Episode 0: up onto the key, left to 0, down to 3,
    # the episode ends; episode 1: up onto the key, right to 2, down to 5, down onto the door; episode 2: the key,
    # then the window shows the door found.
    task = "keydoor3-k0-1-d2-2"
    states = [4, 1, 0, 3] + [4, 1, 2, 5] + [4, 1, 2]
    rewards = [0, 1, 0, 0] + [0, 1, 0, 1] + [0, 1, 0]
    episodes = [0] * 4 + [1] * 4 + [2] * 3
    steps = {s.row: s for s in search_steps("keydoor", task, columns(states, rewards, episodes), 100, episodes=3)}
    assert sorted(steps) == [2, 3, 6, 7, 10]
    # not the key, nor 0 and 3 (searched with the key in episode 0), nor 2 (here); the start cell 4 was crossed
    # without the key only
    assert set(steps[6].may.tolist()) == {4, 5, 6, 7, 8}
    assert set(steps[6].may_in_episode.tolist()) == {0, 3, 4, 5, 6, 7, 8}
    assert set(steps[7].may.tolist()) == {4, 6, 7, 8} and steps[7].episode == 1
    assert steps[10].may is None  # the door's reward (row 7) is in the window
    # a window of 4 transitions keeps its newest 2 when full: at row 6 it starts at row 4, episode 0 is out of it
    short = {s.row: s for s in search_steps("keydoor", task, columns(states, rewards, episodes), 4, episodes=3)}
    assert short[6].window == 4 and np.array_equal(short[6].may, short[6].may_in_episode)
    assert short[10].window == 8 and short[10].may is not None  # the door's find (row 7) has left the window
