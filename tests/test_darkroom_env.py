"""DarkRoom env: gymnasium checks, toymeta-equal dynamics, and single == vectorised transitions."""
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TimeLimit

from tasks.darkroom import GYM_IDS
from tasks.darkroom.env import DarkRoomEnv
from tasks.darkroom.vector_env import DarkRoomVectorEnv


@pytest.mark.parametrize("gym_id", sorted(GYM_IDS))
def test_check_env_on_registered_ids(gym_id):
    env = gym.make(gym_id)
    check_env(env.unwrapped)
    assert env.spec.max_episode_steps == GYM_IDS[gym_id][1]
    obs, _ = env.reset(seed=0)
    size = GYM_IDS[gym_id][0]
    assert obs == (size // 2) * size + size // 2


def test_moves_clip_at_walls_and_reward_after_move():
    env = DarkRoomEnv(size=3, goal=(0, 1))
    obs, _ = env.reset(seed=0)
    assert obs == 4  # centre (1, 1)
    assert env.step(1)[:2] == (1, 1.0)  # up onto the goal
    assert env.step(0)[:2] == (1, 1.0)  # staying on the goal keeps paying
    assert env.step(1)[:2] == (1, 1.0)  # wall: clipped, still on the goal
    assert env.step(4)[:2] == (0, 0.0)  # left
    assert env.step(4)[:2] == (0, 0.0)  # wall
    env = DarkRoomEnv(size=3, goal=(0, 1), terminate_on_goal=True)
    env.reset(seed=0)
    assert env.step(1)[2] is True


@pytest.mark.parametrize("random_start", [False, True])
def test_same_transitions_as_toymeta(random_start):
    toymeta = pytest.importorskip("toymeta.dark_room")
    rng = np.random.default_rng(0)
    ours = DarkRoomEnv(size=5, goal=(1, 3), random_start=random_start)
    ref = toymeta.DarkRoom(size=5, goal=(1, 3), random_start=random_start)
    assert ours.reset(seed=3)[0] == ref.reset(seed=3)[0]
    for action in rng.integers(0, 5, size=200):
        a, b = ours.step(int(action)), ref.step(int(action))
        assert a[:4] == b[:4]


@pytest.mark.parametrize("random_start,terminate", [(False, False), (False, True), (True, True)])
def test_vector_env_matches_single_envs(random_start, terminate):
    size, length, goals, per_goal = 4, 7, [(0, 0), (3, 1), (1, 2)], 3
    vec = DarkRoomVectorEnv(goals, per_goal, size, length, random_start, terminate)
    ref = SyncVectorEnv([lambda g=g: TimeLimit(DarkRoomEnv(size, g, random_start, terminate), length)
                         for g in goals for _ in range(per_goal)], autoreset_mode=AutoresetMode.SAME_STEP)
    assert vec.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"]
    assert vec.observation_space == ref.observation_space and vec.action_space == ref.action_space
    obs, _ = vec.reset(seed=11)
    ref_obs, _ = ref.reset(seed=11)
    np.testing.assert_array_equal(obs, ref_obs)
    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(150):
        actions = rng.integers(0, 5, size=vec.num_envs)
        got, want = vec.step(actions), ref.step(actions)
        for x, y in zip(got[:4], want[:4]):
            np.testing.assert_array_equal(x, y)
        done = got[2] | got[3]
        ends += done.sum()
        if done.any():
            np.testing.assert_array_equal(got[4]["_final_obs"], want[4]["_final_obs"])
            np.testing.assert_array_equal(got[4]["final_obs"][done], want[4]["final_obs"][done].astype(np.int64))
    assert ends > 0 and vec.episode.sum() == ends
