"""Gymnasium wrappers that record every step of an env (or vector env) through a :class:`HistoryRecorder`.

    env = RecordHistory(gymnasium.make("CartPole-v1"), recorder)
    obs, info = env.reset(seed=0)
    env.annotate(logprob=logp, update=n_updates)     # the behaviour policy's facts about the next action
    obs, reward, terminated, truncated, info = env.step(action)

The wrapper knows the observation each action was chosen in and the episode boundaries; the policy's
log-probability and version come from :meth:`annotate`, called before every ``step`` (a step without it is
refused, so no transition is stored with a made-up log-probability).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ad.errors import UserError
from ad.record.recorder import HistoryRecorder


class _Annotated:
    """The annotate / consume handshake both wrappers share."""

    _pending: dict[str, Any] | None = None

    def annotate(self, *, logprob: Any, update: Any = 0, value: Any = None) -> None:
        """Facts about the action the next ``step`` takes: its behaviour log-probability, the policy version
        (updates made so far) and, if the recorder records values, the value estimate."""
        self._pending = {"logprob": logprob, "update": update, "value": value}

    def _consume(self) -> dict[str, Any]:
        if self._pending is None:
            raise UserError("call env.annotate(logprob=..., update=...) before every env.step(): the recorder "
                            "stores the behaviour policy's log-probability of each action")
        pending, self._pending = self._pending, None
        return pending


class RecordHistory(gym.Wrapper, _Annotated):
    """Records a single env's steps as stream 0 of the recorder's unit."""

    def __init__(self, env: gym.Env, recorder: HistoryRecorder) -> None:
        super().__init__(env)
        self.recorder = recorder
        self._obs: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._obs = obs
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if self._obs is None:
            raise UserError("call env.reset() before env.step()")
        facts = self._consume()
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.recorder.step(self._obs, action, reward, terminated, truncated, **facts)
        self._obs = obs
        return obs, reward, terminated, truncated, info


class RecordVectorHistory(gym.vector.VectorWrapper, _Annotated):
    """Records a vector env's steps; env slot ``i`` is stream ``i``. Works with the next-step and same-step
    autoreset modes (in next-step mode the step that only resets a finished env is not a transition and is
    not recorded)."""

    def __init__(self, env: gym.vector.VectorEnv, recorder: HistoryRecorder) -> None:
        super().__init__(env)
        mode = env.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
        if mode not in (gym.vector.AutoresetMode.NEXT_STEP, gym.vector.AutoresetMode.SAME_STEP):
            raise UserError(f"the recorder needs a vector env that resets itself (autoreset mode next-step or "
                            f"same-step), not {mode}")
        self.recorder = recorder
        self._next_step = mode == gym.vector.AutoresetMode.NEXT_STEP
        self._obs: Any = None
        self._resetting = np.zeros(env.num_envs, dtype=bool)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._obs = obs
        self._resetting[:] = False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        if self._obs is None:
            raise UserError("call env.reset() before env.step()")
        facts = self._consume()
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        keep = ~self._resetting if self._next_step else None  # None: every env's step is a transition
        if keep is None or keep.all():  # streams 0..n-1: the recorder's preallocated rows
            self.recorder.step(self._obs, actions, rewards, terminated, truncated, **facts)
        elif keep.any():
            picked = {k: _pick(v, keep, self.num_envs) for k, v in facts.items() if v is not None}
            self.recorder.step(_rows(self._obs, keep), _rows(actions, keep), np.asarray(rewards)[keep],
                               np.asarray(terminated)[keep], np.asarray(truncated)[keep],
                               streams=np.flatnonzero(keep), **picked)
        ended = np.logical_or(terminated, truncated)
        self._resetting = ended if keep is None else ended & keep
        self._obs = obs
        return obs, rewards, terminated, truncated, info


def _rows(values: Any, keep: np.ndarray) -> np.ndarray:
    return np.asarray(values)[keep]


def _pick(value: Any, keep: np.ndarray, n: int) -> Any:
    arr = np.asarray(value)
    return arr[keep] if arr.ndim and arr.shape[0] == n else value
