"""The grid-world env: dynamics, rewards, bad input, the train/held-out split, gymnasium's env checker."""
from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from ad.errors import UserError
from tasks.gridworld import GYM_IDS
from tasks.gridworld.env import GridWorldEnv, all_configs, parse_moves, split_configs


@pytest.mark.parametrize("gym_id", sorted(GYM_IDS))
def test_check_env_every_registered_id(gym_id):
    env = gymnasium.make(gym_id)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and "Grid world is size" in info["info_string"]


def test_forward_turns_goal_and_costs():
    env = GridWorldEnv(size=4, start=(0, 0, 0), goal=(1, 1), move_cost=0.01)
    obs, _ = env.reset(seed=0)
    assert obs.tolist() == [0, 0, 0, 1, 1]
    obs, r, term, trunc, info = env.step("forward")  # north: y + 1
    assert obs.tolist()[:3] == [0, 1, 0] and not term and r == pytest.approx(-0.01)
    obs, r, term, trunc, info = env.step(["right", "forward", "forward", "left"])  # goal after 2 moves, rest ignored
    assert obs.tolist()[:3] == [1, 1, 1] and term and not trunc and info["success"] and info["moves"] == 2
    assert r == pytest.approx(1.0 - 0.02)


def test_off_map_ends_with_penalty_or_clips():
    env = GridWorldEnv(size=3, start=(0, 0, 3), goal=(2, 2), offmap_penalty=1.0, move_cost=0.0)
    env.reset()
    _, r, term, _, info = env.step("[forward]")  # west of x=0
    assert term and info["off_map"] and not info["success"] and r == -1.0
    clip = GridWorldEnv(size=3, start=(0, 0, 3), goal=(2, 2), clip_at_wall=True, move_cost=0.0)
    clip.reset()
    obs, r, term, _, info = clip.step("forward, forward")
    assert not term and r == 0.0 and obs.tolist()[:2] == [0, 0]


def test_time_limit_truncates():
    env = gymnasium.make("ad/GridWorld-4x4-clip-v0")
    env.reset(seed=1, options={"config": (0, 0, 0, 3, 3)})
    for t in range(GYM_IDS["ad/GridWorld-4x4-clip-v0"][1]):
        _, _, term, trunc, _ = env.step(["left", "right"])
    assert trunc and not term


def test_parse_moves_forms_and_errors():
    assert parse_moves("forward, left , right") == [0, 1, 2]
    assert parse_moves("['forward', 'left']") == [0, 1]
    assert parse_moves(np.array([2, 0])) == [2, 0]
    assert parse_moves(("left",)) == [1]
    with pytest.raises(UserError, match="unknown move 'jump'"):
        parse_moves("forward, jump")
    with pytest.raises(UserError, match="malformed"):
        parse_moves([1.5])
    with pytest.raises(UserError, match="out of range"):
        parse_moves([7])
    with pytest.raises(UserError, match="must be a string or a list"):
        parse_moves({"a": 1})
    env = GridWorldEnv(size=4)
    env.reset(seed=0)
    with pytest.raises(UserError, match="unknown move"):
        env.step(["forwards"])


def test_bad_construction():
    with pytest.raises(UserError, match=">= 2"):
        GridWorldEnv(size=1)
    with pytest.raises(UserError, match="equals the start"):
        GridWorldEnv(size=4, start=(1, 1, 0), goal=(1, 1))
    with pytest.raises(UserError, match="outside"):
        GridWorldEnv(size=4, start=(4, 0, 0), goal=(1, 1))
    env = GridWorldEnv(size=4)
    with pytest.raises(UserError, match="reset"):
        env.step("forward")


def test_split_is_disjoint_complete_and_seeded():
    train, held = split_configs(4, 0.2, seed=3)
    assert len(train) + len(held) == len(all_configs(4)) == 16 * 4 * 15
    assert not set(train) & set(held)
    assert split_configs(4, 0.2, seed=3) == (train, held)
    assert split_configs(4, 0.2, seed=4)[1] != held
    env = GridWorldEnv(size=4, configs=held)
    for s in range(20):
        obs, _ = env.reset(seed=s)
        assert tuple(obs.tolist()) in set(held)


def test_egocentric_state_text_agrees_with_the_dynamics():
    from tasks.gridworld.env import apply_moves, state_text

    assert state_text((1, 1, 1, 0, 3), "egocentric").endswith(
        "The goal is 1 cell behind you and 2 cells to your left.")  # facing east: west is behind, north is left
    assert state_text((0, 0, 0, 2, 0)) == "You are at x=0, y=0, facing north. The goal is at x=2, y=0."
    for config in all_configs(4):  # "a ahead, r to the right" -> a forwards, a right turn, r forwards reach it
        words = state_text(config, "egocentric").rsplit("The goal is ", 1)[1]
        ahead = int(words.split(" cell")[0]) if "ahead" in words else 0
        right = int(words.split(" and ")[-1].split(" cell")[0]) if "to your right" in words else 0
        if ahead >= 0 and right >= 0 and "behind" not in words and "left" not in words:
            moves = [0] * ahead + [2] + [0] * right
            assert apply_moves(4, config, moves)[2], (config, words)
    with pytest.raises(UserError, match="state text"):
        state_text((0, 0, 0, 1, 1), "polar")
    with pytest.raises(UserError, match="state text"):
        GridWorldEnv(size=4, text_style="polar")
    assert "cells ahead" in GridWorldEnv(size=4, start=(0, 0, 0), goal=(0, 3), text_style="egocentric").reset()[1][
        "state_text"]
