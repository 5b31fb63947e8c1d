"""The learning-history recorder: plain loop API, Gymnasium wrappers, Stable-Baselines3 callback."""
from __future__ import annotations

import copy

import gymnasium as gym
from stable_baselines3.common.logger import Logger
import numpy as np
import pytest
import torch

from ad.errors import UserError
from ad.history import HistoryReader
from ad.record import HistoryRecorder, RecordHistory, RecordVectorHistory


def _read(path):
    return HistoryReader(path).table().to_pandas().sort_values(["stream", "episode", "step"], kind="stable")


def _cartpole_loop(env, steps, seed=0):
    """Reference: a plain loop over a single env with a random policy, its transitions as tuples."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(steps):
        action = int(rng.integers(2))
        nxt, reward, term, trunc, _ = env.step(action)
        rows.append((obs.copy(), action, reward, term, trunc))
        obs = nxt if not (term or trunc) else env.reset()[0]
    return rows


def test_plain_loop_counts_episodes_and_steps_per_stream(tmp_path):
    space_obs, space_act = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4, start=1)
    with HistoryRecorder(tmp_path / "d", task="t-a", run=2, observation_space=space_obs, action_space=space_act,
                         metadata={"source": {"algorithm": "hand"}}) as rec:
        for t in range(5):
            done = np.array([t == 1, t == 3])
            rec.step(np.full((2, 3), t / 10), np.array([1, 4]), np.array([t, -t]), done, np.zeros(2, bool),
                     logprob=[-0.5, -1.0], update=[t, t])
    table = _read(tmp_path / "d")
    assert len(table) == 10 and set(table.task) == {"t-a"} and set(table.run) == {2}
    s0 = table[table.stream == 0]
    assert s0.episode.tolist() == [0, 0, 1, 1, 1] and s0.step.tolist() == [0, 1, 0, 1, 2]
    s1 = table[table.stream == 1]
    assert s1.episode.tolist() == [0, 0, 0, 0, 1] and s1.step.tolist() == [0, 1, 2, 3, 0]
    assert s1.action.tolist() == [3] * 5  # Discrete(start=1): stored from 0
    assert np.allclose(np.stack(s0.state.to_numpy())[:, 0], [0, 0.1, 0.2, 0.3, 0.4])
    meta = HistoryReader(tmp_path / "d").metadata
    assert meta["task_spec"]["action_space"] == {"type": "Discrete", "n": 4, "start": 1}


def test_unit_invisible_until_closed_and_resumable(tmp_path):
    spaces = dict(observation_space=gym.spaces.Box(-1, 1, (2,)), action_space=gym.spaces.Discrete(2))
    rec = HistoryRecorder(tmp_path / "d", task="t", run=0, **spaces)
    rec.step([0.1, 0.2], 1, 1.0, False, False, logprob=-0.7)
    rec.flush()
    assert list((tmp_path / "d").rglob("*.parquet")) == []  # killed now: nothing visible
    rec.abort()
    with HistoryRecorder(tmp_path / "d", task="t", run=0, **spaces) as rec:
        assert not rec.complete
        rec.step([0.1, 0.2], 1, 1.0, True, False, logprob=-0.7)
    again = HistoryRecorder(tmp_path / "d", task="t", run=0, **spaces)
    assert again.complete
    with pytest.raises(UserError, match="already complete"):
        again.step([0.1, 0.2], 1, 1.0, True, False, logprob=-0.7)
    again.close()
    assert len(_read(tmp_path / "d")) == 1


def test_bad_input_is_a_user_error_and_loses_nothing(tmp_path):
    box, disc = gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2)
    with HistoryRecorder(tmp_path / "d", task="t", run=0, observation_space=box, action_space=disc) as rec:
        rec.step([0.0, 0.0], 0, 1.0, True, False, logprob=-0.1)
    rec = HistoryRecorder(tmp_path / "d", task="t", run=1, observation_space=box, action_space=disc)
    for bad in (dict(reward=float("nan")), dict(logprob=float("inf")), dict(obs=[np.inf, 0.0]),
                dict(action=2.5), dict(obs=[0.0, 0.0, 0.0])):
        args = dict(obs=[0.0, 0.0], action=0, reward=1.0, logprob=-0.1) | bad
        with pytest.raises(UserError):  # refused at the latest when the buffered rows are checked
            rec.step(args["obs"], args["action"], args["reward"], False, False, logprob=args["logprob"])
            rec.flush()
    rec.abort()
    with pytest.raises(UserError, match="different settings"):  # another spec on the same dataset
        HistoryRecorder(tmp_path / "d", task="t", run=1, observation_space=gym.spaces.Box(-1, 1, (3,)),
                        action_space=disc)
    with pytest.raises(UserError, match="not supported"):
        HistoryRecorder(tmp_path / "e", task="t", observation_space=gym.spaces.Dict({"a": box}), action_space=disc)
    assert len(_read(tmp_path / "d")) == 1


def test_wrapper_records_what_a_plain_loop_sees(tmp_path):
    env = gym.make("CartPole-v1")
    expected = _cartpole_loop(gym.make("CartPole-v1"), 60)
    rec = HistoryRecorder(tmp_path / "d", task="cp", observation_space=env.observation_space,
                          action_space=env.action_space)
    wrapped = RecordHistory(env, rec)
    rng = np.random.default_rng(0)
    obs, _ = wrapped.reset(seed=0)
    for _ in range(60):
        wrapped.annotate(logprob=np.log(0.5), update=0)
        obs, _, term, trunc, _ = wrapped.step(int(rng.integers(2)))
        if term or trunc:
            obs, _ = wrapped.reset()
    rec.close()
    table = _read(tmp_path / "d")
    assert len(table) == 60
    assert np.allclose(np.stack(table.state.to_numpy()), np.stack([r[0] for r in expected]))
    assert table.action.tolist() == [r[1] for r in expected]
    assert table.terminated.tolist() == [r[3] for r in expected]
    with pytest.raises(UserError, match="annotate"):
        wrapped.step(0)


@pytest.mark.parametrize("mode", [gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP])
def test_vector_wrapper_streams_match_single_envs(tmp_path, mode):
    n, steps = 3, 80
    env = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": mode})
    rec = HistoryRecorder(tmp_path / "d", task="cp", observation_space=env.single_observation_space,
                          action_space=env.single_action_space)
    wrapped = RecordVectorHistory(env, rec)
    rng = np.random.default_rng(1)
    wrapped.reset(seed=[10, 11, 12])
    for _ in range(steps):
        wrapped.annotate(logprob=np.full(n, np.log(0.5)), update=0)
        wrapped.step(rng.integers(2, size=n))
    rec.close()
    table = _read(tmp_path / "d")
    for i in range(n):
        rows = table[table.stream == i]
        ends = (rows.terminated | rows.truncated).to_numpy()
        assert np.array_equal(rows.step.to_numpy()[1:] == 0, ends[:-1])  # a new episode starts after each end
        # every recorded row is a real transition of an env reset with that seed, replayed one at a time
        single = gym.make("CartPole-v1")
        obs, _ = single.reset(seed=10 + i)
        for state, action, terminated, truncated in zip(rows.state, rows.action, rows.terminated, rows.truncated):
            assert np.allclose(state, obs)
            obs, _, term, trunc, _ = single.step(int(action))
            assert (term, trunc) == (terminated, truncated)
            if term or trunc:
                obs, _ = single.reset()
    for i in range(n):
        rows = table[table.stream == i]
        ends = int((rows.terminated | rows.truncated).sum())
        if mode == gym.vector.AutoresetMode.NEXT_STEP:  # each end but one on the last step costs a reset-only step
            assert len(rows) + ends in (steps, steps + 1)
        else:
            assert len(rows) == steps


def _learn(algo, env_id, tmp_path, steps, **kwargs):
    env = gym.make(env_id)
    rec = HistoryRecorder(tmp_path / algo.__name__, task="t", observation_space=env.observation_space,
                          action_space=env.action_space, value=True, env_id=env_id)
    model = algo("MlpPolicy", env, seed=0, device="cpu", **kwargs)
    model.set_logger(Logger(folder=None, output_formats=[]))  # no empty /tmp/SB3-* folder per run
    initial = copy.deepcopy(model.policy.state_dict())
    model.learn(steps, callback=rec.sb3_callback())
    rec.close()
    return model, initial, _read(tmp_path / algo.__name__)


def test_sb3_ppo_records_the_behaviour_logprob_and_version(tmp_path):
    from stable_baselines3 import PPO

    model, initial, table = _learn(PPO, "CartPole-v1", tmp_path, 192, n_steps=64, batch_size=32, n_epochs=1)
    assert len(table) == 192 and sorted(set(table["update"])) == [0, 1, 2]
    first = table[table["update"] == 0]
    model.policy.load_state_dict(initial)  # the policy that acted in the first rollout
    with torch.no_grad():
        obs = torch.as_tensor(np.stack(first.state.to_numpy()))
        values, logprob, _ = model.policy.evaluate_actions(obs, torch.as_tensor(first.action.to_numpy()))
    assert np.allclose(logprob.numpy(), first.logprob, atol=1e-5)
    assert np.allclose(values.numpy().reshape(-1), first.value, atol=1e-5)


def test_sb3_dqn_logprob_is_the_epsilon_greedy_probability(tmp_path):
    from stable_baselines3 import DQN

    model, _, table = _learn(DQN, "CartPole-v1", tmp_path, 200, learning_starts=50, train_freq=10,
                             exploration_fraction=1.0, exploration_final_eps=0.5)
    assert len(table) == 200
    warm = table.iloc[:50]
    assert np.allclose(warm.logprob, np.log(0.5)) and set(warm["update"]) == {0}
    probs = np.exp(table.iloc[50:].logprob.to_numpy())
    assert ((probs > 0.24) & (probs < 1.0)).all()  # eps / 2 or 1 - eps / 2, eps between 0.5 and 1
    assert table["update"].is_monotonic_increasing and table["update"].iloc[-1] > 10


def test_sb3_a2c_and_sac_record_every_step(tmp_path):
    from stable_baselines3 import A2C, SAC

    _, _, a2c = _learn(A2C, "CartPole-v1", tmp_path, 50, n_steps=5)
    assert len(a2c) == 50 and a2c["update"].tolist() == [i // 5 for i in range(50)]
    _, _, sac = _learn(SAC, "Pendulum-v1", tmp_path, 120, learning_starts=40, train_freq=20)
    assert len(sac) == 120
    assert np.allclose(sac.iloc[:40].logprob, -np.log(2.0))  # uniform warm-up on [-1, 1]
    assert np.isfinite(sac.logprob).all() and not np.allclose(sac.iloc[40:].logprob, -np.log(2.0))
    actions = np.stack(sac.action.to_numpy())
    assert actions.shape == (120, 1) and (np.abs(actions) <= 2.0).all()


@pytest.mark.parametrize("learn_calls", [1, 3])
def test_recording_does_not_change_the_training_it_records(tmp_path, learn_calls):
    """A recorded PPO run ends with the weights of the same run unrecorded, in one learn call or several (the
    recorder draws nothing from the generators PPO samples from and changes nothing it reads)."""
    from stable_baselines3 import PPO

    weights = []
    for record in (False, True):
        env = gym.make("CartPole-v1")
        model = PPO("MlpPolicy", env, seed=3, device="cpu", n_steps=64, batch_size=32, n_epochs=2)
        rec = HistoryRecorder(tmp_path / f"ppo-{learn_calls}", task="t", observation_space=env.observation_space,
                              action_space=env.action_space, value=True) if record else None
        for _ in range(learn_calls):
            model.learn(192 // learn_calls, callback=rec.sb3_callback() if rec else None, reset_num_timesteps=False)
        if rec:
            rec.close()
            assert len(_read(tmp_path / f"ppo-{learn_calls}")) == 192
        weights.append(torch.cat([p.detach().flatten() for p in model.policy.parameters()]))
    assert torch.equal(weights[0], weights[1])
