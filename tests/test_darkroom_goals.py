"""DarkRoom goals: names, the deterministic split, and exact optimal returns."""
import numpy as np
import pytest

from ad.errors import UserError
from tasks.darkroom.env import DarkRoomEnv
from tasks.darkroom.goals import all_goals, optimal_return, parse_goal, parse_task_name, resolve_goals, task_name
from tasks.grid.room import split_goals


def test_goals_are_every_cell_but_the_centre():
    goals = all_goals(9)
    assert len(goals) == 80 and (4, 4) not in goals and len(set(goals)) == 80
    assert all_goals(2) == [(0, 0), (0, 1), (1, 0)]  # centre of a 2x2 grid is (1, 1)


def test_task_names_round_trip():
    assert task_name(9, (2, 3)) == "darkroom9-g2-3"
    assert parse_task_name("darkroom9-g2-3") == (9, (2, 3))
    assert parse_goal("darkroom9-g8-0", 9) == (8, 0)
    assert resolve_goals(["1,2", "0,0", "1,2"], 3) == [(1, 2), (0, 0)]


@pytest.mark.parametrize("bad", ["9,0", "0,-1", "a,b", "1", "1,2,3", "darkroom5-g0-0"])
def test_goal_off_the_grid_or_malformed_is_a_user_error(bad):
    with pytest.raises(UserError):
        parse_goal(bad, 9)


def test_split_is_deterministic_disjoint_and_complete():
    goals = all_goals(9)
    train, heldout = split_goals(goals, 0.25, seed=0)
    assert (train, heldout) == split_goals(goals, 0.25, seed=0)
    assert len(heldout) == 20 and len(train) == 60
    assert set(train) | set(heldout) == set(goals) and not set(train) & set(heldout)
    assert split_goals(goals, 0.25, seed=1)[1] != heldout
    assert split_goals(goals[:1], 0.5, seed=0) == (goals[:1], [])  # never hold out the only goal


def _distance(goal, size):
    return abs(goal[0] - size // 2) + abs(goal[1] - size // 2)


@pytest.mark.parametrize("size,length", [(9, 20), (5, 3), (3, 10)])
def test_optimal_return_matches_closed_form(size, length):
    for goal in all_goals(size):
        d = _distance(goal, size)
        assert optimal_return(size, goal, length, terminate_on_goal=False) == max(0, length - d + 1)
        assert optimal_return(size, goal, length, terminate_on_goal=True) == float(d <= length)


def test_optimal_return_is_achieved_by_walking_straight_to_the_goal():
    size, length, goal = 9, 20, (0, 7)
    env = DarkRoomEnv(size=size, goal=goal)
    obs, _ = env.reset(seed=0)
    total = 0.0
    for _ in range(length):
        row, col = divmod(obs, size)
        action = 1 if row > goal[0] else 3 if row < goal[0] else 2 if col < goal[1] else 4 if col > goal[1] else 0
        obs, reward, *_ = env.step(action)
        total += reward
    assert total == optimal_return(size, goal, length, terminate_on_goal=False)


def test_optimal_return_with_random_start_averages_over_start_cells():
    size, length, goal = 3, 4, (0, 0)
    cells = [(r, c) for r in range(size) for c in range(size)]
    expected = np.mean([length - max(abs(r - goal[0]) + abs(c - goal[1]), 1) + 1 for r, c in cells])
    assert optimal_return(size, goal, length, False, random_start=True) == pytest.approx(expected)
