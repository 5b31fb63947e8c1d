"""Bandit env: gymnasium checks, single == vectorised pulls (Bernoulli and Gaussian), exact optimum and regret."""
import importlib

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv

importlib.import_module("tasks.bandit")  # registers the gymnasium ids, `ad generate bandit` and the eval env

from ad.errors import UserError  # noqa: E402
from tasks.bandit import GYM_IDS  # noqa: E402
from tasks.bandit.env import BanditEnv  # noqa: E402
from ad.registry import env_factory  # noqa: E402
from tasks.bandit.instances import (arm_means, expected_regret, optimal_return, parse_task_name,  # noqa: E402
                                    pull_observations, random_regret, split_instances, task_means, task_name)
from tasks.bandit.vector_env import BanditVectorEnv  # noqa: E402


@pytest.mark.filterwarnings("ignore:.*Box observation space m")  # Gaussian rewards are unbounded
@pytest.mark.parametrize("observation", ["last-pull", "none"])
@pytest.mark.parametrize("gym_id", sorted(GYM_IDS))
def test_check_env_on_registered_ids(gym_id, observation):
    env = gym.make(gym_id, arms=4, observation=observation)
    check_env(env.unwrapped)
    obs, _ = env.reset(seed=0)
    assert env.action_space.n == 4 and np.all(obs == 0)
    obs, reward, terminated, truncated, info = env.step(2)
    assert terminated and not truncated and 0.0 <= info["arm_mean"] <= 1.0
    if observation == "none":
        assert obs == 0
    else:  # the pull's outcome: Bernoulli (arm, reward) as one index, Gaussian one-hot arm then its reward
        if "Bernoulli" in gym_id:
            assert obs == 1 + 2 * 2 + int(reward) and env.observation_space.n == 9
        else:
            np.testing.assert_allclose(obs, [0, 0, 1, 0, 0, 0, reward, 0], rtol=1e-6)
        assert env.observation_space.contains(obs)
        np.testing.assert_array_equal(env.reset()[0], obs)  # the next pull sees it
        assert np.all(env.reset(seed=1)[0] == 0)  # a new run starts from zeros


@pytest.mark.parametrize("gym_id", sorted(GYM_IDS))
def test_make_vec_uses_the_native_vector_env_and_matches_single_envs(gym_id):
    vec = gym.make_vec(gym_id, num_envs=3, arms=4)
    assert isinstance(vec.unwrapped, BanditVectorEnv)
    ref = SyncVectorEnv([lambda: gym.make(gym_id, arms=4) for _ in range(3)], autoreset_mode=AutoresetMode.SAME_STEP)
    vec.reset(seed=5)
    ref.reset(seed=5)
    np.testing.assert_array_equal(vec.unwrapped.means, np.stack([e.unwrapped.means for e in ref.envs]))
    rng = np.random.default_rng(0)
    for _ in range(300):  # past a block of noise drawn ahead
        actions = rng.integers(0, 4, 3)
        got, want = vec.step(actions), ref.step(actions)
        for x, y in zip(got[:4], want[:4]):
            np.testing.assert_allclose(x, y, rtol=1e-6)


def test_bernoulli_rewards_are_0_or_1_with_the_arm_means():
    env = BanditEnv(arms=2, means=[0.2, 0.9])
    env.reset(seed=1)
    pulls = np.array([[env.step(a)[1] for a in (0, 1)] for _ in range(4000)])  # (4000, 2)
    assert set(np.unique(pulls)) <= {0.0, 1.0}
    np.testing.assert_allclose(pulls.mean(0), [0.2, 0.9], atol=0.03)


def test_random_instance_is_kept_across_pulls_and_redrawn_on_a_seeded_reset():
    env = BanditEnv(arms=3)
    env.reset(seed=0)
    first = env.means.copy()
    env.step(0)
    env.reset()  # the next pull (autoreset): same instance
    np.testing.assert_array_equal(env.means, first)
    env.reset(seed=1)
    assert not np.array_equal(env.means, first)


@pytest.mark.parametrize("observation", ["last-pull", "none"])
@pytest.mark.parametrize("kind", ["bernoulli", "gaussian"])
def test_vector_env_matches_single_envs(kind, observation):
    means = np.random.default_rng(0).uniform(0, 1, (3, 5))  # 3 instances, 5 arms
    per_task = 2
    vec = BanditVectorEnv(means, per_task, kind=kind, noise_std=0.3, observation=observation)
    ref = SyncVectorEnv([lambda m=m: BanditEnv(5, kind, m, 0.3, observation) for m in means for _ in range(per_task)],
                        autoreset_mode=AutoresetMode.SAME_STEP)
    assert vec.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"]
    assert vec.observation_space == ref.observation_space and vec.action_space == ref.action_space
    np.testing.assert_array_equal(vec.reset(seed=11)[0], ref.reset(seed=11)[0])
    rng = np.random.default_rng(1)
    for _ in range(600):  # more than two blocks of noise drawn ahead
        actions = rng.integers(0, 5, size=vec.num_envs)
        got, want = vec.step(actions), ref.step(actions)
        for x, y in zip(got[:4], want[:4]):
            np.testing.assert_allclose(x, y, rtol=1e-6)  # rewards: float32 here, float64 there
        assert got[2].all() and got[4]["_final_obs"].all()
        np.testing.assert_allclose(np.stack(got[4]["final_obs"]), np.stack(want[4]["final_obs"]), rtol=1e-6)
        np.testing.assert_array_equal(got[4]["arm_mean"], np.repeat(means, per_task, 0)[np.arange(6), actions])
    regret = vec.regret()
    assert regret.shape == (6, 600) and (regret >= 0).all()


def test_regret_of_a_run_is_exact():
    means = np.array([[0.1, 0.5, 0.3], [0.9, 0.2, 0.4]])
    actions = np.array([[1, 0, 2, 1], [0, 0, 2, 1]])
    np.testing.assert_allclose(expected_regret(means, actions), [[0, 0.4, 0.2, 0], [0, 0, 0.5, 0.7]])
    np.testing.assert_allclose(optimal_return(means), [0.5, 0.9])
    np.testing.assert_allclose(random_regret(means), [0.5 - 0.3, 0.9 - 0.5])
    vec = BanditVectorEnv(means, 1)
    vec.reset(seed=0)
    for t in range(4):
        vec.step(actions[:, t])
    np.testing.assert_allclose(vec.regret(), expected_regret(means, actions))


def test_task_names_means_and_split():
    name = task_name("bernoulli", 5, 123)
    assert name == "bandit-bern5-i00123" and parse_task_name(name) == ("bernoulli", 5, 123)
    assert parse_task_name(task_name("gaussian", 10, 7)) == ("gaussian", 10, 7)
    np.testing.assert_array_equal(arm_means("bernoulli", 5, 123), task_means([name])[0])  # a name = fixed means
    assert not np.array_equal(arm_means("bernoulli", 5, 123), arm_means("gaussian", 5, 123))
    with pytest.raises(UserError):
        parse_task_name("darkroom9-g1-2")
    train, heldout = split_instances(100, 0.1, seed=0)
    assert len(heldout) == 10 and sorted(train + heldout) == list(range(100))
    assert split_instances(100, 0.1, seed=1)[1] != heldout  # another seed, another held-out split
    assert split_instances(100, 0.1, seed=0) == (train, heldout)


def test_eval_env_plays_the_named_instances():
    meta = {"task_spec": {"kind": "gaussian", "arms": 10, "noise_std": 0.2}}
    tasks = [task_name("gaussian", 10, i) for i in (3, 8)]
    setup = env_factory("bandit")(meta, tasks, envs_per_task=2)
    assert setup.env.num_envs == 4 and setup.num_actions == 10 and setup.env.noise_std == 0.2
    assert setup.env.observation == "none"  # datasets without task_spec.observation: the constant state
    np.testing.assert_array_equal(setup.optimal, [arm_means("gaussian", 10, i).max() for i in (3, 8)])
    with pytest.raises(UserError, match="5-armed"):
        env_factory("bandit")(meta, [task_name("gaussian", 5, 1)])


def test_pull_observations_pair_each_reward_with_its_arm():
    obs = pull_observations(np.array([[2, 0]]), np.array([[0.5, -1.0]]), 3, "gaussian")
    np.testing.assert_array_equal(obs, [[[0, 0, 1, 0, 0, 0.5], [1, 0, 0, -1.0, 0, 0]]])
    assert obs.dtype == np.float32
    index = pull_observations(np.array([0, 0, 2, 2]), np.array([0.0, 1.0, 0.0, 1.0]), 3, "bernoulli")
    np.testing.assert_array_equal(index, [1, 2, 5, 6])  # 0 is the observation before the first pull
