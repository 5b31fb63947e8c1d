"""The SB3 callback's batched recording (PPO / A2C read from SB3's rollout buffer at each rollout's end) stores
exactly the rows the per-step recording did: same seed, same rows, bit for bit."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger

from ad.errors import UserError
from ad.history import HistoryReader
from ad.record import HistoryRecorder
from ad.record.sb3 import HistoryCallback

COLUMNS = ["task", "run", "stream", "episode", "step", "update", "state", "action", "reward", "terminated",
           "truncated", "logprob", "value"]


class PerStepCallback(HistoryCallback):
    """The previous implementation: every env step handed to ``HistoryRecorder.step`` from SB3's locals (with the
    rewards copied: it kept SB3's array, to which SB3 adds a truncated step's bootstrapped value after the call)."""

    def _record_rollout(self) -> None:
        pass

    def _on_step(self) -> bool:
        loc = self.locals
        dones = np.asarray(loc["dones"], dtype=bool)
        truncated = dones.copy()
        if dones.any():
            truncated &= np.array([bool(info.get("TimeLimit.truncated", False)) for info in loc["infos"]])
        self.recorder.step(loc["obs_tensor"], loc["clipped_actions"], loc["rewards"].copy(), dones & ~truncated,
                           truncated,
                           logprob=loc["log_probs"], update=self.updates,
                           value=loc["values"] if self.recorder.value else None)
        return True


class StopAt(BaseCallback):
    """Stops training (or raises) at the given call."""

    def __init__(self, at: int, fail: bool = False) -> None:
        super().__init__()
        self.at, self.fail = at, fail

    def _on_step(self) -> bool:
        if self.n_calls == self.at and self.fail:
            raise KeyboardInterrupt
        return self.n_calls < self.at


def _record(tmp_path, name, per_step, algo, env_fn, steps, stop=None, relearn=0, **kwargs):
    env = env_fn()
    space = env.observation_space, env.action_space
    rec = HistoryRecorder(tmp_path / name, task="t", observation_space=space[0], action_space=space[1], value=True)
    model = algo("MlpPolicy", env, seed=0, device="cpu", **kwargs)
    model.set_logger(Logger(folder=None, output_formats=[]))
    callback = (PerStepCallback if per_step else HistoryCallback)(rec)
    try:
        model.learn(steps, callback=CallbackList([callback, stop]) if stop else callback)
    except KeyboardInterrupt:
        pass
    if relearn:  # training goes on after the interruption, with the same callback
        model.learn(relearn, callback=callback, reset_num_timesteps=False)
    rec.close()
    table = HistoryReader(tmp_path / name).table().to_pandas()
    return table.sort_values(["stream", "episode", "step"], kind="stable").reset_index(drop=True)[COLUMNS]


def _assert_same(a, b):
    assert len(a) == len(b) and len(a) > 0
    for name in COLUMNS:
        left, right = a[name].to_numpy(), b[name].to_numpy()
        if name in ("state", "action") and left.dtype == object:
            left, right = np.stack(left), np.stack(right)
        assert np.array_equal(left, right), name


def _cartpole_short():
    return make_vec_env(lambda: gym.make("CartPole-v1", max_episode_steps=30), n_envs=2, seed=3)


CASES = {
    # two envs, episodes cut at 30 steps: truncated steps, whose reward SB3 bootstraps in place after the callback
    "ppo-cartpole-2envs": (PPO, _cartpole_short, 256, None, dict(n_steps=64, batch_size=64, n_epochs=1)),
    "a2c-cartpole": (A2C, lambda: gym.make("CartPole-v1"), 60, None, dict(n_steps=5)),
    # Box actions: the stored action is the clipped one the env received
    "ppo-pendulum": (PPO, lambda: gym.make("Pendulum-v1"), 128, None, dict(n_steps=64, batch_size=64, n_epochs=1)),
    # a squashing (gSDE) policy: the env receives the action unscaled from [-1, 1]
    "ppo-pendulum-squashed": (PPO, lambda: gym.make("Pendulum-v1"), 128, None,
                              dict(n_steps=64, batch_size=64, n_epochs=1, use_sde=True,
                                   policy_kwargs=dict(squash_output=True))),
    # another callback stops training in the middle of a rollout; an exception cuts one short before close()
    "ppo-stopped": (PPO, _cartpole_short, 256, (100, False), dict(n_steps=64, batch_size=64, n_epochs=1)),
    "ppo-interrupted": (PPO, _cartpole_short, 256, (100, True), dict(n_steps=64, batch_size=64, n_epochs=1)),
    "ppo-interrupted-then-resumed": (PPO, _cartpole_short, 256, (100, True),
                                     dict(n_steps=64, batch_size=64, n_epochs=1, relearn=128)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_batched_rows_equal_per_step_rows(tmp_path, case):
    algo, env_fn, steps, stop, kwargs = CASES[case]
    tables = [_record(tmp_path, f"d{per_step}", per_step, algo, env_fn, steps,
                      stop=None if stop is None else StopAt(*stop), **kwargs) for per_step in (True, False)]
    _assert_same(*tables)
    if case == "ppo-cartpole-2envs":
        assert tables[0].truncated.any() and tables[0].terminated.any() and set(tables[0].stream) == {0, 1}
        assert (tables[1].reward == 1.0).all()  # CartPole's reward, not SB3's bootstrapped one on truncated steps
    if stop is not None:  # every step taken, the last one included
        assert len(tables[0]) == 2 * stop[0] + kwargs.get("relearn", 0)


def test_plain_loop_values_reused_in_place_are_recorded_as_given(tmp_path):
    spaces = dict(observation_space=gym.spaces.Box(-1, 1, (2,)), action_space=gym.spaces.Discrete(2))
    obs, reward, done = np.zeros((2, 2), np.float32), np.zeros(2, np.float32), np.zeros(2, bool)
    with HistoryRecorder(tmp_path / "d", task="t", **spaces) as rec:
        for t in range(3):
            obs[:], reward[:], done[:] = t / 10, t, t == 1
            rec.step(obs, np.array([0, 1]), reward, done, np.zeros(2, bool), logprob=np.full(2, -0.5), update=t)
    table = HistoryReader(tmp_path / "d").table().to_pandas().sort_values(["stream", "episode", "step"])
    assert table.reward.tolist() == [0, 1, 2] * 2 and table.terminated.tolist() == [False, True, False] * 2
    assert table.episode.tolist() == [0, 0, 1] * 2 and table["update"].tolist() == [0, 1, 2] * 2
    assert np.allclose(np.stack(table.state.to_numpy())[:, 0], [0, 0.1, 0.2] * 2)


def _plain_calls(seed=0):
    """A plain loop's step() calls: 1 then 2 streams, numpy arrays, Python scalars, lists and torch tensors (one
    requiring grad), with a steps() batch in between; more rows than one flush holds."""
    import torch

    rng = np.random.default_rng(seed)
    calls = []
    for t in range(3200):
        n = 1 if t < 1500 else 2
        obs, action = rng.normal(size=(n, 2)).astype(np.float32), rng.integers(3, size=n)
        reward, done, logprob = rng.normal(size=n), rng.random(n) < 0.05, -rng.random(n)
        if n == 1 and t % 2:
            kwargs = dict(obs=obs[0], action=int(action[0]), reward=float(reward[0]), terminated=bool(done[0]),
                          truncated=False, logprob=float(logprob[0]), update=t // 100, value=np.float32(reward[0]))
        else:
            kwargs = dict(obs=torch.as_tensor(obs) if t % 3 == 0 else obs, action=action, reward=reward,
                          terminated=done, truncated=np.zeros(n, bool), update=np.full(n, t // 100),
                          logprob=logprob.tolist() if t % 5 == 0 else logprob, value=torch.as_tensor(reward))
            if t % 11 == 0:  # a tensor that requires grad has no numpy view: kept as given
                kwargs["logprob"] = torch.as_tensor(logprob, dtype=torch.float32).requires_grad_()
        calls.append(("step", n, kwargs))
        if t == 2000:
            batch = dict(obs=rng.normal(size=(10, 2, 2)), action=rng.integers(3, size=(10, 2)),
                         reward=rng.normal(size=(10, 2)), terminated=rng.random((10, 2)) < 0.2,
                         truncated=np.zeros((10, 2), bool), logprob=-rng.random((10, 2)), update=20,
                         value=np.zeros((10, 2)))
            calls.append(("steps", 2, batch))
    return calls


def test_plain_loop_rows_are_the_same_through_preallocated_rows_and_as_given(tmp_path):
    """step() copies a step into preallocated rows where every value fits one; a step with explicit stream ids is
    kept as given. Both give the same rows."""
    spaces = dict(observation_space=gym.spaces.Box(-5, 5, (2,)), action_space=gym.spaces.Discrete(3), value=True)
    tables = []
    for explicit in (False, True):
        with HistoryRecorder(tmp_path / f"d{explicit}", task="t", **spaces) as rec:
            for method, n, kwargs in _plain_calls():
                if method == "steps":
                    rec.steps(**kwargs)
                else:
                    rec.step(**kwargs, streams=np.arange(n) if explicit else None)
        table = HistoryReader(tmp_path / f"d{explicit}").table().to_pandas()
        tables.append(table.sort_values(["stream", "episode", "step"], kind="stable").reset_index(drop=True))
    _assert_same(*(t[COLUMNS] for t in tables))
    assert len(tables[0]) == 1500 + 2 * 1700 + 20 and tables[0].episode.max() > 10


def test_steps_refuses_values_without_time_and_stream_dimensions(tmp_path):
    spaces = dict(observation_space=gym.spaces.Box(-1, 1, (2,)), action_space=gym.spaces.Discrete(2))
    rec = HistoryRecorder(tmp_path / "d", task="t", **spaces)
    with pytest.raises(UserError, match="time, stream"):
        rec.steps(np.zeros((4, 2)), np.zeros(4), np.zeros(4), np.zeros(4, bool), np.zeros(4, bool),
                  logprob=np.zeros(4))
    with pytest.raises(UserError, match="does not fit"):  # one stream's obs given for two
        rec.steps(np.zeros((4, 2)), np.zeros((4, 2)), np.zeros((4, 2)), np.zeros((4, 2), bool),
                  np.zeros((4, 2), bool), logprob=np.zeros((4, 2)))
        rec.flush()
    rec.abort()
