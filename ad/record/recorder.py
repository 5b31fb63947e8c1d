"""Record any training loop's transitions as a learning history.

    rec = HistoryRecorder("data/mine", task="cartpole-len0.7", run=0, observation_space=env.observation_space,
                          action_space=env.action_space)
    ...  # in the training loop, for every env step:
    rec.step(obs, action, reward, terminated, truncated, logprob=logp, update=n_updates)
    # or, where the loop keeps a rollout in (time, env) arrays, once per rollout:
    rec.steps(obs_buf, action_buf, reward_buf, terminated_buf, truncated_buf, logprob=logp_buf, update=n_updates)
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
from ad.record.block import SCALARS, StepBlock
from ad.record.spaces import buffer_for, column_for_space, from_space, space_to_dict

#: Rows buffered before they are checked and handed to the unit writer.
FLUSH_ROWS = 4096
_STREAMS = np.arange(FLUSH_ROWS, dtype=np.int32)


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
        observation_space: the env's Gymnasium observation space (Discrete or Box).
        action_space: the env's Gymnasium action space (Discrete or Box).
        value: record the algorithm's value estimate of each step in an extra ``value`` column.
        family: the dataset's family name (a dataset of another family is refused).
        metadata: dataset metadata besides the ``task_spec`` (source algorithm and its config, seeds, split);
            resuming needs the same metadata, so a run with other settings cannot mix into the dataset.
        env_id: the Gymnasium id, recorded in the ``task_spec`` with the spaces.
        env_kwargs: the env's keyword arguments, recorded in the ``task_spec`` too.
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
        self._episode = np.zeros(0, np.int32)  # per stream: current episode, and step within it
        self._step = np.zeros(0, np.int32)
        self._columns = self._empty_columns(FLUSH_ROWS)  # for steps of varying streams (see flush)
        self._filled = 0
        self._pending: list[tuple] = []  # steps as given, converted together at the next flush
        self._block: StepBlock | None = None  # single steps of streams 0..n-1, copied into preallocated rows
        self._pending_rows = 0
        self._before_close: list[Any] = []  # callables that hand over steps still held elsewhere (SB3's rollout)

    # ------------------------------------------------------------------ writing
    def step(self, obs: Any, action: Any, reward: Any, terminated: Any, truncated: Any, *, logprob: Any,
             update: int | Any = 0, value: Any = None, streams: Any = None) -> None:
        """Record one env step of every stream given.

        ``obs`` is the observation the action was chosen in (not the next one). Scalars record one stream
        (stream 0); arrays with a leading dimension of N record streams ``0..N-1`` (or ``streams``).
        ``logprob`` is the behaviour policy's log-probability of ``action``; ``update`` the number of policy
        updates made before the action was chosen (one int, or one per stream). Steps are copied into preallocated
        rows (or, where a value does not fit one, kept as given) and converted, checked (shape, range, finiteness)
        and counted into episodes together when they are flushed, before anything is written, so recording costs
        the training loop little.
        """
        if self._unit is None:
            self._check_open()
        if self.value and value is None:
            raise UserError("this recorder records values (value=True): pass value= to step()")
        n = 1 if isinstance(reward, SCALARS) else int(np.size(reward))
        values = (obs, action, reward, terminated, truncated, logprob, update, value)
        if streams is None and n:
            block = self._block
            if block is None or block.n != n:
                block = self._new_block(n)
            if block.put(values):
                self._pending_rows += n
                if self._pending_rows >= FLUSH_ROWS:
                    self.flush()
                return
        self._seal()
        self._pending.append((*(_kept(v) for v in values), _kept(streams), n, 1))
        self._pending_rows += n
        if self._pending_rows >= FLUSH_ROWS:
            self.flush()

    def _new_block(self, n: int) -> StepBlock:
        """Hand the current block's steps on and start one for steps of n streams."""
        self._seal()
        obs = (tuple(self.observation_space.shape or ()), self._columns["state"].dtype)
        action = (tuple(self.action_space.shape or ()), self._columns["action"].dtype)
        self._block = StepBlock(n, -(-FLUSH_ROWS // n), obs, action, self.value)
        return self._block

    def _seal(self) -> None:
        """The block's steps become one buffered (time, stream) batch, in their place among the buffered steps."""
        block, self._block = self._block, None
        if block is not None and block.t:
            self._pending.append((*block.taken(), None, block.n, block.t))

    def steps(self, obs: Any, action: Any, reward: Any, terminated: Any, truncated: Any, *, logprob: Any,
              update: int | Any = 0, value: Any = None) -> None:
        """Record T consecutive env steps of N streams at once (a rollout as a batched loop keeps it).

        Every value has leading dimensions (T, N) (time, then stream ``0..N-1``), e.g. ``obs`` (T, N, *obs_shape)
        and ``reward`` (T, N); ``update`` is one int or an array broadcastable to (T, N) (for instance (T, 1)).
        The rows are the ones T calls of :meth:`step`, one per time step, would record, for a T-th of the cost.
        """
        self._check_open()
        if self.value and value is None:
            raise UserError("this recorder records values (value=True): pass value= to steps()")
        self._seal()
        shape = np.shape(reward)
        if len(shape) != 2:
            raise UserError(f"steps() takes values with leading dimensions (time, stream); reward has shape {shape}")
        T, n = int(shape[0]), int(shape[1])
        if T * n == 0:
            return
        kept = [_kept(v) for v in (obs, action, reward, terminated, truncated, logprob, update, value)]
        self._pending.append((*kept, None, n, T))
        self._pending_rows += T * n
        if self._pending_rows >= FLUSH_ROWS:
            self.flush()

    def _check_open(self) -> None:
        if self._unit is None:
            raise UserError(f"unit task={self.task} run={self.run} is already complete in {self.writer.location}; "
                            "skip its training (check HistoryRecorder.complete) or record another run")

    def flush(self) -> None:
        """Convert and check the buffered steps and hand them to the unit writer (still invisible until
        :meth:`close`)."""
        self._seal()
        if not self._pending or self._unit is None:
            return
        steps, self._pending, self._pending_rows = self._pending, [], 0
        n = steps[0][9]
        if all(s[8] is None and s[9] == n for s in steps):
            cols = self._columns_of_uniform(steps, n)  # every step: the same streams 0..n-1
        else:
            for step in steps:
                for one in _single_steps(step):
                    self._write_step(*one)
            cols = {name: values[:self._filled].copy() for name, values in self._columns.items()}
            self._filled = 0
        for name in ("state", "action", "reward", "logprob", "value"):
            if name in cols and cols[name].dtype.kind == "f" and not np.isfinite(cols[name]).all():
                bad = int(np.flatnonzero(~np.isfinite(cols[name]).reshape(len(cols[name]), -1).all(axis=1))[0])
                raise UserError(f"{name} of stream {cols['stream'][bad]}, episode {cols['episode'][bad]}, step "
                                f"{cols['step'][bad]} is not finite; the recorder stores finite values only: check "
                                "the environment or the algorithm")
        cols["state"] = from_space(cols["state"], self.observation_space, "obs")
        cols["action"] = from_space(cols["action"], self.action_space, "action")
        order = np.argsort(cols["stream"], kind="stable")  # a stream's rows stay in time order
        self._unit.append({name: values[order] for name, values in cols.items()})

    def _columns_of_uniform(self, steps: list[tuple], n: int) -> dict[str, np.ndarray]:
        """The columns of the buffered steps (single steps and blocks of steps) that each recorded streams 0..n-1,
        converted all at once; S is the number of time steps."""
        S = sum(s[10] for s in steps)
        if n > self._episode.shape[0]:
            self._grow(n)

        def stacked(i: int, dtype: Any, trailing: tuple[int, ...] = ()) -> np.ndarray:
            try:
                if i == 6:  # update: one int, or one per stream (and per time step for a block)
                    parts = [np.broadcast_to(np.asarray(s[i], dtype=dtype).reshape(-1) if s[10] == 1
                                             else np.asarray(s[i], dtype=dtype), (s[10], n)) for s in steps]
                else:
                    parts = [np.asarray(s[i], dtype=dtype).reshape(s[10], n, *trailing) for s in steps]
                return parts[0] if len(parts) == 1 else np.concatenate(parts)  # (S, n, ...)
            except (ValueError, TypeError):
                what = ("obs", "action", "reward", "terminated", "truncated", "logprob", "update", "value")[i]
                raise UserError(f"{what} of a step does not fit {n} stream(s) (shapes: "
                                f"{sorted({np.shape(s[i]) for s in steps})}); give one value per stream") from None

        state_shape, action_shape = self._columns["state"].shape[1:], self._columns["action"].shape[1:]
        cols = {"state": stacked(0, self._columns["state"].dtype, state_shape).reshape(S * n, *state_shape),
                "action": stacked(1, self._columns["action"].dtype, action_shape).reshape(S * n, *action_shape),
                "reward": stacked(2, np.float32).reshape(-1)}
        terminated, truncated = stacked(3, bool), stacked(4, bool)  # (S, n)
        cols["terminated"], cols["truncated"] = terminated.reshape(-1), truncated.reshape(-1)
        cols["logprob"] = stacked(5, np.float32).reshape(-1)
        cols["update"] = stacked(6, np.int64).reshape(-1)
        if self.value:
            cols["value"] = stacked(7, np.float32).reshape(-1)
        # episode and step of every row, from each stream's counters and the episode ends before it
        ended = terminated | truncated  # (S, n)
        ep0, st0 = self._episode[:n].copy(), self._step[:n].copy()
        index = np.arange(S)[:, None]  # (S, 1)
        last_end = np.maximum.accumulate(np.where(ended, index, -1), axis=0)  # (S, n): last end at or before s
        before = np.vstack([np.full((1, n), -1), last_end[:-1]])  # (S, n): last end strictly before s
        cols["episode"] = (ep0 + np.cumsum(ended, axis=0) - ended).astype(np.int32).reshape(-1)
        cols["step"] = np.where(before >= 0, index - before - 1, st0 + index).astype(np.int32).reshape(-1)
        cols["stream"] = np.tile(_STREAMS[:n], S)
        self._episode[:n] = ep0 + ended.sum(axis=0)
        self._step[:n] = np.where(last_end[-1] >= 0, S - 1 - last_end[-1], st0 + S)
        return cols

    def _write_step(self, obs: Any, action: Any, reward: Any, terminated: Any, truncated: Any, logprob: Any,
                    update: Any, value: Any, streams: Any, n: int, _steps: int = 1) -> None:
        """One buffered step into the column buffers (steps with their own stream ids or stream counts)."""
        if streams is None:
            stream, needed = _STREAMS[:n], n
        else:
            stream = np.asarray(streams, np.int32).reshape(-1)
            if stream.shape[0] != n or (n and stream.min() < 0):
                raise UserError(f"streams must be {n} non-negative ids, one per reward; got {streams!r}")
            needed = int(stream.max()) + 1 if n else 0
        if needed > self._episode.shape[0]:
            self._grow(needed)
        if self._filled + n > self._columns["stream"].shape[0]:
            self._columns = {k: np.concatenate([v, np.zeros_like(v)]) for k, v in self._columns.items()}
        rows, cols = slice(self._filled, self._filled + n), self._columns
        try:
            cols["state"][rows] = np.asarray(obs).reshape(n, *cols["state"].shape[1:])
            cols["action"][rows] = np.asarray(action).reshape(n, *cols["action"].shape[1:])
        except ValueError:
            raise UserError(f"obs / action of shapes {np.shape(obs)} / {np.shape(action)} do not fit {n} stream(s) "
                            f"of {self.observation_space} / {self.action_space}") from None
        cols["stream"][rows] = stream
        cols["update"][rows] = update
        cols["episode"][rows] = self._episode[stream]
        cols["step"][rows] = self._step[stream]
        cols["reward"][rows] = np.asarray(reward, np.float32).reshape(-1)
        cols["terminated"][rows] = terminated
        cols["truncated"][rows] = truncated
        cols["logprob"][rows] = logprob
        if self.value:
            cols["value"][rows] = value
        ended = cols["terminated"][rows] | cols["truncated"][rows]
        self._step[stream] += 1
        if ended.any():
            self._episode[stream[ended]] += 1
            self._step[stream[ended]] = 0
        self._filled += n

    def _empty_columns(self, rows: int) -> dict[str, np.ndarray]:
        columns = {"stream": np.zeros(rows, np.int32), "update": np.zeros(rows, np.int64),
                   "episode": np.zeros(rows, np.int32), "step": np.zeros(rows, np.int32),
                   "state": buffer_for(self.observation_space, rows), "action": buffer_for(self.action_space, rows),
                   "reward": np.zeros(rows, np.float32), "terminated": np.zeros(rows, bool),
                   "truncated": np.zeros(rows, bool), "logprob": np.zeros(rows, np.float32)}
        if self.value:
            columns["value"] = np.zeros(rows, np.float32)
        return columns

    def close(self, info: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Commit the unit (it becomes visible in one rename) and, if this recorder opened the dataset, release
        it. Returns the unit's record (None if it was already complete)."""
        record = None
        if self._unit is not None:
            try:
                for hand_over in self._before_close:
                    hand_over()
                self.flush()
            except BaseException:
                self.abort()
                raise
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
        self._filled, self._pending, self._pending_rows, self._block = 0, [], 0, None
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
        grow = streams - self._episode.shape[0]
        self._episode = np.concatenate([self._episode, np.zeros(grow, np.int32)])
        self._step = np.concatenate([self._step, np.zeros(grow, np.int32)])


def _single_steps(step: tuple) -> list[tuple]:
    """A buffered entry as single steps (a block of T steps from :meth:`HistoryRecorder.steps` as T of them)."""
    T = step[10]
    if T == 1:
        return [step]
    obs, action, reward, terminated, truncated, logprob, update, value, streams, n, _ = step
    try:
        update = np.broadcast_to(np.asarray(update, np.int64), (T, n))
    except ValueError:
        raise UserError(f"update of shape {np.shape(update)} does not fit {T} steps of {n} stream(s); give one "
                        "int or an array broadcastable to (time, stream)") from None
    fields = []
    for what, values in zip(("obs", "action", "reward", "terminated", "truncated", "logprob", "value"),
                            (obs, action, reward, terminated, truncated, logprob, value)):
        values = None if values is None else np.asarray(values)
        if values is not None and (values.ndim == 0 or values.shape[0] != T):
            raise UserError(f"{what} of shape {values.shape} does not fit {T} steps of {n} stream(s); give values "
                            "with leading dimensions (time, stream)")
        fields.append(values)
    return [(*(f[t] for f in fields[:6]), update[t],
             None if fields[6] is None else fields[6][t], None, n, 1) for t in range(T)]


_IMMUTABLE = (*SCALARS, type(None))


def _kept(value: Any) -> Any:
    """A value kept until the next flush: numpy arrays are copied (a loop may reuse its arrays in place), a torch
    tensor is copied to numpy, a Python or numpy scalar (or None) is kept as is (it cannot change), anything else
    (a list) becomes an array."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, _IMMUTABLE):
        return value
    if hasattr(value, "detach"):  # a torch tensor: .numpy() shares its memory, so copy
        try:
            return value.numpy().copy()
        except (RuntimeError, TypeError):  # it requires grad or lives on a GPU
            return value.detach().cpu().numpy()
    return np.array(value)
