"""Record any training loop's transitions as a learning history.

    rec = HistoryRecorder("data/mine", task="cartpole-len0.7", run=0, observation_space=env.observation_space,
                          action_space=env.action_space)
    ...  # in the training loop, for every env step:
    rec.step(obs, action, reward, terminated, truncated, logprob=logp, update=n_updates)
    rec.close()                                     # commits the unit (task x run); until then it is invisible

One recorder writes one *unit* (a task x run) of a dataset through :class:`ad.history.HistoryWriter`, so it is
crash-safe and resumable like every family's generator: a killed run leaves nothing of its unit, and
``HistoryRecorder(...).complete`` says whether the unit is already in the dataset (skip its training then).
Vector envs: pass batched values (leading dimension = number of envs); env slot ``i`` is stream ``i``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.errors import UserError
from ad.history import HistorySpec, HistoryWriter
from ad.record.spaces import column_for_space, space_to_dict, to_column

#: Rows buffered before they are handed to the unit writer.
FLUSH_ROWS = 4096


def recording_spec(observation_space: Any, action_space: Any, value: bool = False) -> HistorySpec:
    """The column layout a recorder writes for these spaces (``value``: also an extra float32 ``value`` column)."""
    return HistorySpec(column_for_space(observation_space, "observation"), column_for_space(action_space, "action"),
                       extra={"value": "float32"} if value else {})


def env_spec(observation_space: Any, action_space: Any, env_id: str | None = None,
             env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``task_spec`` recorded in the dataset: Gymnasium id, kwargs and spaces (what a checkpoint is checked
    against, the way Minari records an env spec)."""
    return {"env_id": env_id, "kwargs": dict(env_kwargs or {}),
            "observation_space": space_to_dict(observation_space), "action_space": space_to_dict(action_space)}


class HistoryRecorder:
    """Writes the transitions of one task x run, in the order they happen, with the policy version that acted.

    Args:
        out: dataset folder or URL, or an open :class:`HistoryWriter` (to write several units of one dataset
            from one process).
        task: path-safe task id (names a partition folder), e.g. ``"cartpole-len0.7"``.
        run: the run (seed) of the source algorithm on this task.
        observation_space, action_space: Gymnasium spaces (Discrete or Box).
        value: record the algorithm's value estimate of each step in an extra ``value`` column.
        family: the dataset's family name (a dataset of another family is refused).
        metadata: dataset metadata besides the ``task_spec`` (source algorithm and its config, seeds, split);
            resuming needs the same metadata, so a run with other settings cannot mix into the dataset.
        env_id, env_kwargs: recorded in the ``task_spec`` with the spaces.
    """

    def __init__(self, out: Any, task: str, run: int = 0, *, observation_space: Any, action_space: Any,
                 value: bool = False, family: str = "gym", metadata: dict[str, Any] | None = None,
                 env_id: str | None = None, env_kwargs: dict[str, Any] | None = None) -> None:
        self.observation_space, self.action_space = observation_space, action_space
        self.value = value
        if isinstance(out, HistoryWriter):
            self.writer, self._owns_writer = out, False
        else:
            meta = {"task_spec": env_spec(observation_space, action_space, env_id, env_kwargs), **(metadata or {})}
            self.writer = HistoryWriter(out, recording_spec(observation_space, action_space, value), family, meta)
            self._owns_writer = True
        self.task, self.run = task, int(run)
        self.complete = self.writer.is_complete(task, self.run)
        self._unit = None if self.complete else self.writer.open_unit(task, self.run)
        self._episode: np.ndarray | None = None  # per stream: current episode, step within it
        self._step: np.ndarray | None = None
        self._rows: list[dict[str, np.ndarray]] = []
        self._buffered = 0

    # ------------------------------------------------------------------ writing
    def step(self, obs: Any, action: Any, reward: Any, terminated: Any, truncated: Any, *, logprob: Any,
             update: int | Any = 0, value: Any = None, streams: Any = None) -> None:
        """Record one env step of every stream given.

        ``obs`` is the observation the action was chosen in (not the next one). Scalars record one stream
        (stream 0); arrays with a leading dimension of N record streams ``0..N-1`` (or ``streams``).
        ``logprob`` is the behaviour policy's log-probability of ``action``; ``update`` the number of policy
        updates made before the action was chosen (one int, or one per stream).
        """
        if self._unit is None:
            raise UserError(f"unit task={self.task} run={self.run} is already complete in {self.writer.location}; "
                            "skip its training (check HistoryRecorder.complete) or record another run")
        reward_arr = np.asarray(reward, dtype=np.float64).reshape(-1)
        n = reward_arr.size
        stream = np.arange(n, dtype=np.int32) if streams is None else np.asarray(streams, np.int32).reshape(-1)
        if stream.size != n:
            raise UserError(f"streams has {stream.size} entries for {n} rewards")
        self._grow(int(stream.max()) + 1)
        columns = {
            "stream": stream,
            "update": _per_stream(update, n, np.int64, "update"),
            "episode": self._episode[stream].copy(),
            "step": self._step[stream].copy(),
            "state": to_column(obs, self.observation_space, n, "obs"),
            "action": to_column(action, self.action_space, n, "action"),
            "reward": _finite(reward_arr, "reward").astype(np.float32),
            "terminated": _per_stream(terminated, n, np.bool_, "terminated"),
            "truncated": _per_stream(truncated, n, np.bool_, "truncated"),
            "logprob": _finite(_per_stream(logprob, n, np.float64, "logprob"), "logprob").astype(np.float32),
        }
        if self.value:
            if value is None:
                raise UserError("this recorder records values (value=True): pass value= to step()")
            columns["value"] = _finite(_per_stream(value, n, np.float64, "value"), "value").astype(np.float32)
        ended = columns["terminated"] | columns["truncated"]
        self._step[stream] += 1
        self._episode[stream[ended]] += 1
        self._step[stream[ended]] = 0
        self._rows.append(columns)
        self._buffered += n
        if self._buffered >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        """Hand the buffered rows to the unit writer (still invisible until :meth:`close`)."""
        if not self._rows or self._unit is None:
            return
        merged = {name: np.concatenate([r[name] for r in self._rows]) for name in self._rows[0]}
        order = np.argsort(merged["stream"], kind="stable")  # a stream's rows stay in time order
        self._unit.append({name: values[order] for name, values in merged.items()})
        self._rows.clear()
        self._buffered = 0

    def close(self, info: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Commit the unit (it becomes visible in one rename) and, if this recorder opened the dataset, release
        it. Returns the unit's record (None if it was already complete)."""
        record = None
        if self._unit is not None:
            self.flush()
            record = self._unit.commit(info)
            self._unit = None
            self.complete = True
        if self._owns_writer:
            self.writer.close()
        return record

    def abort(self) -> None:
        """Drop everything recorded for this unit (a later run records it from scratch)."""
        if self._unit is not None:
            self._unit.abort()
            self._unit = None
        self._rows.clear()
        if self._owns_writer:
            self.writer.close()

    def __enter__(self) -> "HistoryRecorder":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # ------------------------------------------------------------------ integrations
    def sb3_callback(self, verbose: int = 0) -> Any:
        """A Stable-Baselines3 callback that records every env step of ``model.learn`` (PPO, A2C, SAC, DQN);
        see :mod:`ad.record.sb3` for what ``logprob`` and ``value`` mean for each algorithm."""
        from ad.record.sb3 import HistoryCallback

        return HistoryCallback(self, verbose=verbose)

    def _grow(self, streams: int) -> None:
        have = 0 if self._episode is None else self._episode.size
        if streams > have:
            self._episode = np.concatenate([self._episode if have else np.zeros(0, np.int32),
                                            np.zeros(streams - have, np.int32)])
            self._step = np.concatenate([self._step if have else np.zeros(0, np.int32),
                                         np.zeros(streams - have, np.int32)])


def _per_stream(values: Any, n: int, dtype: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size == 1 and n != 1:
        arr = np.full(n, arr.reshape(()).item())
    arr = arr.reshape(-1)
    if arr.size != n:
        raise UserError(f"{name} has {arr.size} entries for {n} streams")
    return arr.astype(dtype)


def _finite(values: np.ndarray, name: str) -> np.ndarray:
    if not np.isfinite(values).all():
        raise UserError(f"{name} holds a non-finite number ({values[~np.isfinite(values)][0]}); the recorder "
                        "stores finite values only: check the environment or the algorithm")
    return values
