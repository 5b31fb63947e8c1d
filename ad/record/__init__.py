"""Record any Gymnasium environment's training run as a learning history.

- :class:`HistoryRecorder`: the plain API for any training loop (``rec.step(obs, action, reward, terminated,
  truncated, logprob=..., update=...)``, or ``rec.steps(...)`` for a rollout of (time, env) arrays), one task x
  run per recorder, crash-safe and resumable.
- :class:`RecordHistory` / :class:`RecordVectorHistory`: Gymnasium wrappers that record an env's steps.
- ``recorder.sb3_callback()``: a Stable-Baselines3 callback (PPO, A2C, SAC, DQN), see :mod:`ad.record.sb3`.
"""
from ad.record.recorder import HistoryRecorder, env_spec, recording_spec
from ad.record.wrapper import RecordHistory, RecordVectorHistory

__all__ = ["HistoryRecorder", "RecordHistory", "RecordVectorHistory", "env_spec", "recording_spec"]
