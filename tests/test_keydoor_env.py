"""Dark Key-to-Door env: gymnasium checks, toymeta-equal dynamics, single == vectorised transitions, the exact
optimum, task names and the seeded draw / split."""
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TimeLimit

from ad.errors import UserError
from tasks.keydoor import GYM_IDS
from tasks.keydoor.env import KeyDoorEnv
from ad.registry import env_factory
from tasks.grid.room import split_goals
from tasks.keydoor.pairs import all_pairs, draw_pairs, optimal_return, parse_pair, parse_task_name, task_name
from tasks.keydoor.vector_env import KeyDoorVectorEnv


@pytest.mark.parametrize("gym_id", sorted(GYM_IDS))
def test_check_env_on_registered_ids(gym_id):
    env = gym.make(gym_id)
    check_env(env.unwrapped)
    size, steps = GYM_IDS[gym_id]
    assert env.spec.max_episode_steps == steps
    obs, info = env.reset(seed=0)
    assert obs == (size // 2) * size + size // 2 and info == {"has_key": False}


def test_key_pays_once_and_the_door_only_with_the_key():
    env = KeyDoorEnv(size=3, pair=(0, 1, 1, 2))  # key above the centre, door right of it
    assert env.reset(seed=0)[0] == 4
    assert env.step(2)[:3] == (5, 0.0, False)  # the door without the key: nothing, no end
    assert env.step(4)[:3] == (4, 0.0, False)
    assert env.step(1)[:3] == (1, 1.0, False)  # the key
    assert env.step(0)[:3] == (1, 0.0, False)  # staying on it pays nothing more
    assert env.step(1)[:3] == (1, 0.0, False)  # wall: clipped
    assert env.step(3)[:2] == (4, 0.0)
    obs, reward, terminated, truncated, info = env.step(2)
    assert (obs, reward, terminated, truncated, info) == (5, 1.0, True, False, {"has_key": True})


@pytest.mark.parametrize("random_start", [False, True])
def test_same_transitions_as_toymeta(random_start):
    toymeta = pytest.importorskip("toymeta.dark_key_door")
    rng = np.random.default_rng(0)
    for key, door in (((1, 3), (2, 2)), ((2, 2), (0, 4)), ((4, 4), (0, 0))):  # incl. the key on the start cell
        ours = KeyDoorEnv(size=5, pair=(*key, *door), random_start=random_start)
        ref = toymeta.DarkKeyToDoor(size=5, goal=(np.array(door), np.array(key)), random_start=random_start)
        for episode in range(20):
            a, b = ours.reset(seed=3 + episode), ref.reset(seed=3 + episode)
            assert a == b
            for action in rng.integers(0, 5, size=60):
                a, b = ours.step(int(action)), ref.step(int(action))
                assert a == b
                if a[2]:
                    break


@pytest.mark.parametrize("random_start", [False, True])
def test_vector_env_matches_single_envs(random_start):
    size, length, pairs, per_task = 4, 12, [(0, 0, 3, 3), (3, 1, 1, 1), (1, 2, 2, 1)], 3
    vec = KeyDoorVectorEnv(pairs, per_task, size, length, random_start)
    ref = SyncVectorEnv([lambda p=p: TimeLimit(KeyDoorEnv(size, p, random_start), length)
                         for p in pairs for _ in range(per_task)], autoreset_mode=AutoresetMode.SAME_STEP)
    assert vec.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"]
    assert vec.observation_space == ref.observation_space and vec.action_space == ref.action_space
    np.testing.assert_array_equal(vec.reset(seed=11)[0], ref.reset(seed=11)[0])
    rng = np.random.default_rng(1)
    ends = terminations = 0
    for _ in range(400):
        actions = rng.integers(0, 5, size=vec.num_envs)
        got, want = vec.step(actions), ref.step(actions)
        for x, y in zip(got[:4], want[:4]):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(vec.has_key & ~(got[2] | got[3]), want[4]["has_key"] & ~(got[2] | got[3]))
        done = got[2] | got[3]
        ends, terminations = ends + done.sum(), terminations + got[2].sum()
        if done.any():
            np.testing.assert_array_equal(got[4]["_final_obs"], want[4]["_final_obs"])
            np.testing.assert_array_equal(got[4]["final_obs"][done], want[4]["final_obs"][done].astype(np.int64))
    assert terminations > 0 and ends > terminations and vec.episode.sum() == ends


def test_the_source_view_adds_the_key_flag_to_the_cell():
    vec = KeyDoorVectorEnv([(1, 1, 0, 0)], 1, size=3, episode_length=10, observe_key=True)
    assert vec.single_observation_space.n == 18
    assert vec.reset(seed=0)[0].tolist() == [4]
    assert vec.step([0])[0].tolist() == [4 + 9]  # noop onto the key (the centre): carried from now on
    obs, reward, terminated, _, info = vec.step([4])
    assert obs.tolist() == [3 + 9] and reward.tolist() == [0.0]
    obs, reward, terminated, _, info = vec.step([1])  # the door: the episode ends, the next starts without the key
    assert reward.tolist() == [1.0] and terminated.tolist() == [True]
    assert info["final_obs"].tolist() == [0 + 9] and obs.tolist() == [4]


def test_optimal_return_is_exact():
    # 9x9, 50 steps: both rewards are always reachable (at most 8 + 16 moves)
    assert {optimal_return(9, p, 50) for p in draw_pairs(9, 200, 0)} == {2.0}
    assert optimal_return(9, (4, 4, 0, 0), 50) == 2.0  # key on the start cell: one noop picks it up
    assert optimal_return(9, (4, 4, 0, 0), 8) == 1.0  # 1 + 8 steps needed
    assert optimal_return(9, (4, 4, 0, 0), 9) == 2.0
    assert optimal_return(9, (0, 0, 8, 8), 23) == 1.0 and optimal_return(9, (0, 0, 8, 8), 24) == 2.0
    assert optimal_return(9, (0, 0, 8, 8), 7) == 0.0
    # random start: the mean over start cells of the optimum from each (3x3, 3 steps, key (0,0), door (0,1))
    starts = {(r, c): (abs(r) + abs(c) + 1 if (r, c) != (0, 0) else 2) for r in range(3) for c in range(3)}
    want = np.mean([2.0 if n <= 3 else (1.0 if n - 1 <= 3 else 0.0) for n in starts.values()])
    assert optimal_return(3, (0, 0, 0, 1), 3, random_start=True) == pytest.approx(want)


def test_task_names_draw_and_split():
    assert len(all_pairs(9)) == 81 * 80 and len(set(all_pairs(3))) == 72
    assert task_name(9, (1, 2, 7, 7)) == "keydoor9-k1-2-d7-7"
    assert parse_task_name("keydoor9-k1-2-d7-7") == (9, (1, 2, 7, 7))
    assert parse_pair("1,2/7,7", 9) == parse_pair("keydoor9-k1-2-d7-7", 9) == (1, 2, 7, 7)
    for bad in ("1,2/1,2", "1,2/9,0", "1,2", "keydoor5-k1-2-d3-3", "a,b/c,d"):
        with pytest.raises(UserError):
            parse_pair(bad, 9)
    drawn = draw_pairs(9, 300, seed=0)
    assert len(set(drawn)) == 300 and drawn == draw_pairs(9, 300, seed=0) and drawn != draw_pairs(9, 300, seed=1)
    assert draw_pairs(3, 0, 0) == all_pairs(3) and draw_pairs(9, 5, 0, ["0,0/1,1", "0,0/1,1"]) == [(0, 0, 1, 1)]
    train, heldout = split_goals(drawn, 0.1, seed=0)
    assert len(heldout) == 30 and sorted(train + heldout) == sorted(drawn)
    assert split_goals(drawn, 0.1, seed=1)[1] != heldout


def test_eval_env_plays_the_named_pairs_and_knows_their_optimum():
    meta = {"task_spec": {"size": 5, "episode_length": 9, "random_start": False}}
    setup = env_factory("keydoor")(meta, ["keydoor5-k0-0-d4-4", "keydoor5-k2-3-d2-1"], envs_per_task=2)
    assert setup.env.num_envs == 4 and setup.num_actions == 5 and not setup.env.observe_key
    np.testing.assert_array_equal(setup.optimal, [1.0, 2.0])  # 4 + 8 moves > 9 steps: the key only
    with pytest.raises(UserError, match="room"):
        env_factory("keydoor")(meta, ["keydoor9-k0-0-d4-4"])
