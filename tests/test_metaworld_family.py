"""Meta-World ML1 family: the registered id passes check_env, the hidden goal matches ML1's own partially observable
env, the vector env matches single envs, the noise source's log-densities, the goal-blind search source (finds a goal
from the reward alone, never reads it), `ad generate metaworld` (columns, metadata, resume, batching), and bad input
as one error line."""
from __future__ import annotations

import importlib
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("metaworld")
importlib.import_module("tasks.metaworld")  # registers the gymnasium id, `ad generate metaworld` and the eval env

from ad.errors import UserError  # noqa: E402
from ad.history import HistoryReader, content_hash  # noqa: E402
from tasks.metaworld import GYM_ID  # noqa: E402
from tasks.metaworld import skills  # noqa: E402
from tasks.metaworld.env import MetaWorldML1Env  # noqa: E402
from ad.registry import env_factory  # noqa: E402
from tasks.metaworld.noise import clipped_gaussian_logprob, noise_schedule  # noqa: E402
from tasks.metaworld.search import RunAndTumble  # noqa: E402
from tasks.metaworld.vector_env import MetaWorldVectorEnv  # noqa: E402
from cli_run import run_cli  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high", "ignore:.*Box .* space")

TINY = ["--train-goals", "0,1", "--heldout-goals", "3", "--episodes", "2", "--episode-length", "6",
        "--no-progress"]


def test_check_env_on_the_registered_id_and_the_goal_is_hidden():
    env = gym.make(GYM_ID, skill="reach-v3", split="test", goal=3)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (39,) and np.all(obs[-3:] == 0) and env.observation_space.contains(obs)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert np.all(obs[-3:] == 0) and not terminated and 0.0 <= reward <= 10.0 and info["success"] in (0.0, 1.0)
    expert = env.unwrapped.expert_observation()
    np.testing.assert_array_equal(expert[:-3], obs[:-3])
    assert np.linalg.norm(expert[-3:]) > 0  # the goal, for the scripted expert only
    assert env.spec.max_episode_steps == 100


def test_observations_match_ml1s_own_partially_observable_env():
    """The same task in Meta-World's ML1 env (goal hidden by Meta-World) gives the same observations and rewards."""
    bench = skills.benchmark("reach-v3", 0)
    reference = bench.train_classes["reach-v3"]()
    reference.set_task(bench.train_tasks[2])
    ours = MetaWorldML1Env("reach-v3", "train", 2)
    rng = np.random.default_rng(0)
    a, b = reference.reset()[0], ours.reset()[0]
    np.testing.assert_array_equal(a, b)
    for _ in range(5):
        action = rng.uniform(-1, 1, 4).astype(np.float32)
        a, ra, *_ = reference.step(action)
        b, rb, *_ = ours.step(action)
        np.testing.assert_array_equal(a, b)
        assert ra == rb


def test_vector_env_matches_single_envs_and_autoresets_at_the_episode_length():
    goals = [("train", 0), ("test", 4)]
    vec = MetaWorldVectorEnv("reach-v3", goals, episode_length=3)
    singles = [MetaWorldML1Env("reach-v3", s, g) for s, g in goals]
    obs, _ = vec.reset(seed=1)
    np.testing.assert_array_equal(obs, np.stack([e.reset()[0] for e in singles]))
    rng = np.random.default_rng(1)
    for t in range(4):
        actions = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
        obs, rewards, terminated, truncated, infos = vec.step(actions)
        steps = [e.step(a) for e, a in zip(singles, actions)]
        np.testing.assert_array_equal(rewards, [s[1] for s in steps])
        np.testing.assert_array_equal(infos["success"], [s[4]["success"] > 0 for s in steps])
        assert not terminated.any() and truncated.all() == (t == 2)
        if t == 2:  # the episode ended: final_obs is its last observation, obs the next episode's first
            np.testing.assert_array_equal(infos["final_obs"], np.stack([s[0] for s in steps]))
            np.testing.assert_array_equal(obs, np.stack([e.reset()[0] for e in singles]))
        else:
            np.testing.assert_array_equal(obs, np.stack([s[0] for s in steps]))
    made = gym.make_vec(GYM_ID, num_envs=2, vectorization_mode="vector_entry_point", skill="reach-v3",
                        split="test", goals=[4, 9])
    assert isinstance(made, MetaWorldVectorEnv) and made.goals == [("test", 4), ("test", 9)]


def test_noise_schedule_and_clipped_gaussian_logprob():
    from scipy.stats import norm

    sigmas = noise_schedule(5, 4.0, 0.1)
    assert sigmas[0] == 4.0 and np.isclose(sigmas[-1], 0.1) and np.all(np.diff(sigmas) < 0)
    assert np.allclose(np.diff(np.log(sigmas)), np.log(0.1 / 4.0) / 4)  # geometric
    mean, sigma = np.array([[0.3, 1.5, -2.0, 0.0]]), np.array([0.7])
    action = np.array([[0.5, 1.0, -1.0, -0.2]])
    expected = (norm.logpdf(0.5, 0.3, 0.7) + np.log(norm.sf(1.0, 1.5, 0.7)) + np.log(norm.cdf(-1.0, -2.0, 0.7))
                + norm.logpdf(-0.2, 0.0, 0.7))
    assert np.isclose(clipped_gaussian_logprob(action, mean, sigma)[0], expected)
    # one dimension: the density inside the box plus the two point masses integrate to 1
    grid = np.linspace(-1, 1, 20001)[1:-1]
    inside = np.exp(clipped_gaussian_logprob(grid[:, None], np.full((len(grid), 1), 0.4), np.full(len(grid), 0.9)))
    masses = np.exp(clipped_gaussian_logprob(np.array([[-1.0], [1.0]]), np.full((2, 1), 0.4), np.full(2, 0.9)))
    assert abs(inside.mean() * 2 + masses.sum() - 1) < 1e-3


def test_generate_records_histories_metadata_and_resumes_identically(tmp_path, capsys):
    out = tmp_path / "mw"
    argv = ["generate", "metaworld", "--skill", "reach-v3", "--source", "noise", "--out", str(out), *TINY]
    assert run_cli(capsys, *argv)[0] == 0
    reader = HistoryReader(out)
    meta, spec = reader.metadata, reader.metadata["task_spec"]
    assert reader.family == "metaworld" and reader.num_transitions() == 3 * 2 * 6
    assert meta["split"] == {"train": ["mw-reach-v3-train-g00", "mw-reach-v3-train-g01"],
                             "heldout": ["mw-reach-v3-test-g03"]}
    assert spec["skill"] == "reach-v3" and spec["episode_length"] == 6 and spec["env_id"] == GYM_ID
    assert spec["observation_space"]["shape"] == [39] and spec["action_space"]["low"] == -1.0
    assert spec["state_dim"] == 39 and spec["action_dim"] == 4 and spec["goal_hidden"]
    task = meta["tasks"]["mw-reach-v3-test-g03"]
    assert task["ml1_split"] == "test" and task["goal"] == 3 and len(task["goal_position"]) == 3
    assert task["optimal_return"] > 0 and meta["source"]["expert"] == "metaworld.policies.SawyerReachV3Policy"
    table = reader.table().to_pandas()
    assert {"success", "noise"} <= set(table.columns)
    one = table[table.task == "mw-reach-v3-train-g01"]
    assert list(one.episode) == [0] * 6 + [1] * 6 and list(one["update"]) == list(one.episode)
    assert list(one.step) == list(range(6)) * 2 and list(one.truncated) == [False] * 5 + [True] + [False] * 5 + [True]
    assert np.allclose(one.noise, [4.0] * 6 + [0.1] * 6) and np.isfinite(one.logprob).all()
    state = np.stack(one.state.to_numpy())
    assert state.shape == (12, 39) and np.all(state[:, -3:] == 0)
    assert np.abs(np.stack(one.action.to_numpy())).max() <= 1.0
    first = content_hash(out)
    assert run_cli(capsys, *argv)[0] == 0 and content_hash(out) == first  # resume: nothing redone
    batched = tmp_path / "batched"  # a unit's history does not depend on the batching or the processes
    assert run_cli(capsys, *[a if a != str(out) else str(batched) for a in argv], "--batch", "1",
                   "--workers", "2")[0] == 0
    assert content_hash(batched) == first
    evaluation = env_factory("metaworld")(meta, ["mw-reach-v3-test-g03"], envs_per_task=2)  # what `ad eval` acts in
    assert evaluation.env.num_envs == 2 and evaluation.env.episode_length == 6
    assert evaluation.optimal.tolist() == [task["optimal_return"]]
    with pytest.raises(UserError, match="push-v3"):
        env_factory("metaworld")(meta, ["mw-push-v3-test-g03"])


def _search_success(goal: np.ndarray, episodes: int, steps: int, seed: int) -> list[bool]:
    """The search on a point hand that moves 1 cm a step per unit of action, rewarded -distance to ``goal``:
    whether each episode came within 5 cm of the goal."""
    search = RunAndTumble([np.random.default_rng(seed)], centre=np.array([0.0, 0.85, 0.175]), sigma=0.1)
    reached = []
    for _ in range(episodes):
        hand, hit = np.array([[0.0, 0.6, 0.2]]), False
        search.start_episode()
        for _ in range(steps):
            action, mean, logprob = search.act(hand)
            assert np.abs(action).max() <= 1.0 and np.isfinite(logprob).all() and mean[0, 3] == 0.0
            hand = hand + 0.01 * action[:, :3]
            distance = np.linalg.norm(hand[0] - goal)
            search.observe(np.array([-distance]), hand)
            hit |= distance < 0.05
        reached.append(bool(hit))
    return reached


def test_search_finds_a_goal_from_the_reward_alone_and_keeps_it():
    rng = np.random.default_rng(7)
    goals = rng.uniform([-0.1, 0.8, 0.05], [0.1, 0.9, 0.3], size=(20, 3))
    runs = np.array([_search_success(g, episodes=5, steps=80, seed=i) for i, g in enumerate(goals)])  # (20, 5)
    assert runs[:, 0].mean() < runs[:, 2:].mean()  # it learns across episodes ...
    assert runs[:, 2:].mean() >= 0.9  # ... and returns to what it found
    assert _search_success(goals[0], 3, 80, 0) == _search_success(goals[0], 3, 80, 0)  # a seed gives one history


def _best_distance(memory: str, goal: np.ndarray, seed: int) -> float:
    """Distance (m) from the search's kept position to ``goal`` after 6 episodes of a point hand rewarded as reach
    is: 10 within 5 cm of the goal, less outside (saturated inside the ball)."""
    search = RunAndTumble([np.random.default_rng(seed)], centre=np.array([0.0, 0.85, 0.175]), sigma=0.1,
                          memory=memory)
    for _ in range(6):
        hand = np.array([[0.0, 0.6, 0.2]])
        search.start_episode()
        for _ in range(80):
            action, _, _ = search.act(hand)
            hand = hand + 0.01 * action[:, :3]
            distance = np.linalg.norm(hand[0] - goal)
            search.observe(np.array([10.0 if distance <= 0.05 else 10.0 - distance]), hand)
    return float(np.linalg.norm(search.best[0] - goal))


def test_search_memory_mean_keeps_a_position_inside_the_saturated_ball():
    goals = np.random.default_rng(3).uniform([-0.1, 0.8, 0.05], [0.1, 0.9, 0.3], size=(12, 3))
    first = np.array([_best_distance("first", g, i) for i, g in enumerate(goals)])
    mean = np.array([_best_distance("mean", g, i) for i, g in enumerate(goals)])
    assert (first <= 0.05 + 1e-9).all() and (mean <= 0.05 + 1e-9).all()  # both found the ball (a convex set)
    assert np.median(first) > 0.04  # the first best-rewarded position: near the ball's edge
    assert np.median(mean) < 0.75 * np.median(first)  # the mean of them: well inside
    with pytest.raises(ValueError, match="memory"):
        RunAndTumble([np.random.default_rng(0)], centre=np.zeros(3), sigma=0.1, memory="last")


def test_generate_search_never_reads_the_goal_and_resumes_identically(tmp_path, capsys, monkeypatch):
    out = tmp_path / "mw"
    argv = ["generate", "metaworld", "--source", "search", "--out", str(out), "--train-goals", "0", "--heldout-goals",
            "1", "--episodes", "3", "--episode-length", "80", "--noise-min", "0.2", "--no-progress"]
    import tasks.metaworld.generate as generate

    real = generate.expert_rollouts
    monkeypatch.setattr(generate, "expert_rollouts", lambda *a: (real(*a), monkeypatch.setattr(
        MetaWorldVectorEnv, "expert_observations", lambda self: pytest.fail("the search read the goal")))[0])
    assert run_cli(capsys, *argv)[0] == 0
    monkeypatch.undo()
    reader = HistoryReader(out)
    assert reader.metadata["source"]["algorithm"] == "search" and len(reader.metadata["source"]["prior"]) == 3
    table = reader.table().to_pandas()
    assert np.allclose(table.noise, 0.2) and np.isfinite(table.logprob).all()
    assert np.abs(np.stack(table.action.to_numpy())).max() <= 1.0
    success = table.groupby(["task", "episode"]).success.any().unstack()  # (tasks, episodes)
    assert success[2].all()  # both goals found by the last episode
    first = content_hash(out)
    assert run_cli(capsys, *argv)[0] == 0 and content_hash(out) == first  # resume: nothing redone
    batched = tmp_path / "batched"  # a unit's history does not depend on the batching
    assert run_cli(capsys, *[a if a != str(out) else str(batched) for a in argv], "--batch", "1")[0] == 0
    assert content_hash(batched) == first


@pytest.mark.parametrize("extra, expected", [
    (["--skill", "reach-v9"], "reach-v3"),  # an unknown skill: the message lists the skills
    (["--heldout-goals", "48-50"], "out of range"),
    (["--train-goals", "x"], "--train-goals"),
    (["--train-goals", ""], "--train-goals"),
    (["--noise-min", "2", "--noise-max", "1"], "--noise-min"),
    (["--episode-length", "501"], "--episode-length"),
    (["--source", "search", "--skill", "push-v3"], "reach-v3"),  # its reward is not the hand's distance alone
])
def test_bad_options_are_one_error_line(tmp_path, capsys, extra, expected):
    code, err, _ = run_cli(capsys, "generate", "metaworld", "--out", str(tmp_path / "d"), *extra)
    assert code == 2 and expected in err
    assert not (tmp_path / "d").exists()


def test_a_skill_without_a_scripted_expert_is_refused(tmp_path, capsys, monkeypatch):
    policies = importlib.import_module("metaworld.policies")
    monkeypatch.setattr(policies, "ENV_POLICY_MAP", {k: v for k, v in policies.ENV_POLICY_MAP.items()
                                                     if k != "push-v3"})
    code, err, _ = run_cli(capsys, "generate", "metaworld", "--skill", "push-v3", "--out", str(tmp_path / "d"))
    assert code == 2 and "no scripted expert" in err and "reach-v3" in err


def test_mujoco_failing_to_load_is_one_error_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "metaworld", None)  # `import metaworld` now raises ImportError
    code, err, _ = run_cli(capsys, "generate", "metaworld", "--out", str(tmp_path / "d"), *TINY)
    assert code == 2 and "MuJoCo failed to load" in err and "pip install" in err
    assert not (tmp_path / "d").exists()


def test_a_model_that_fails_to_compile_is_one_error_line(tmp_path, capsys, monkeypatch):
    bench = skills.benchmark("reach-v3", 0)

    def broken(*args, **kwargs):
        raise ValueError("XML Error: Schema violation")  # what mujoco.MjModel.from_xml_path raises

    monkeypatch.setitem(bench.train_classes, "reach-v3", broken)
    code, err, _ = run_cli(capsys, "generate", "metaworld", "--out", str(tmp_path / "d"), *TINY)
    assert code == 2 and "MuJoCo failed to load the reach-v3 model" in err
    assert not (tmp_path / "d").exists()
