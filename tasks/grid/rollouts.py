"""Where each update's A2C rollout goes: to the history writer (:class:`BatchWriter`: env-major columns split into
one column batch per goal (unit), appended on a background thread when asked, so Parquet encoding overlaps with
training) and to the episode-return bookkeeping (:class:`ReturnTracker`)."""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import numpy as np

from ad.history.unit import UnitWriter
from tasks.grid.a2c import Rollout

#: Rollout fields that become history columns (with their storage dtypes).
_ROLLOUT_COLUMNS = {"episode": np.int32, "step": np.int32, "state": np.int16, "action": np.int8,
                    "reward": np.float32, "terminated": bool, "truncated": bool, "logprob": np.float32,
                    "value": np.float32}


def env_major(rollouts: list[Rollout]) -> dict[str, np.ndarray]:
    """Buffered rollouts as env-major columns: name -> ``(E, K*T)`` (row e = sub-env e's steps in time order)."""
    K, (T, E) = len(rollouts), rollouts[0].state.shape
    columns = {}
    for name, dtype in _ROLLOUT_COLUMNS.items():
        x = np.stack([getattr(r, name) for r in rollouts], dtype=dtype)  # (K, T, E), cast while copying
        columns[name] = np.ascontiguousarray(x.reshape(K * T, E).T)  # (E, K*T)
    update = np.array([r.update for r in rollouts], dtype=np.int64)  # (K,)
    columns["update"] = np.repeat(update, T)  # (K*T,) shared by every sub-env
    return columns


def unit_columns(columns: dict[str, np.ndarray], g: int, envs_per_goal: int) -> dict[str, np.ndarray]:
    """Goal ``g``'s column batch from :func:`env_major` columns: stream-major, time-ordered within a stream."""
    N = envs_per_goal
    steps = columns["update"].shape[0]  # K*T
    batch = {name: columns[name][g * N:(g + 1) * N].reshape(-1) for name in _ROLLOUT_COLUMNS}  # (N*K*T,) each
    batch["stream"] = np.repeat(np.arange(N, dtype=np.int32), steps)
    batch["update"] = np.tile(columns["update"], N)
    return batch


class BatchWriter:
    """Hands buffered rollouts to a batch's units in order, on a background thread if ``background`` (encoding then
    overlaps with the next updates; one hand-off in flight at most; a writer error is raised at the next hand-off).
    ``derive``, if given, maps each unit's column batch to the columns stored (e.g. Key-to-Door's cell without the key).
    """

    def __init__(self, units: dict[int, UnitWriter], envs_per_goal: int, background: bool = False,
                 derive: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None):
        self.units, self.envs_per_goal, self.derive = units, envs_per_goal, derive
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="grid-writer",
                                        initializer=_lower_priority) if background else None
        self._pending: Future | None = None

    def submit(self, rollouts: list[Rollout]) -> None:
        """Append these rollouts (no longer modified by the caller) to every unit."""
        self.wait()
        if self._pool is None:
            self._append(rollouts)
        else:
            self._pending = self._pool.submit(self._append, rollouts)

    def _append(self, rollouts: list[Rollout]) -> None:
        columns = env_major(rollouts)
        for g, unit in self.units.items():
            batch = unit_columns(columns, g, self.envs_per_goal)
            unit.append(batch if self.derive is None else self.derive(batch))

    def wait(self) -> None:
        """Block until the hand-off in flight is written; re-raise its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def finish(self) -> None:
        """Write every unit's buffered rows (their last shards), half of the units on the background thread."""
        self.wait()
        units = list(self.units.values())
        half = len(units) // 2 if self._pool is not None else 0
        if half:
            self._pending = self._pool.submit(lambda: [unit.flush() for unit in units[:half]])
        for unit in units[half:]:
            unit.flush()
        self.wait()

    def close(self) -> None:
        """Stop the background thread (after the write in flight, if any; its error is not raised here)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _lower_priority() -> None:
    """Give the calling thread a lower CPU priority (Linux: per-thread nice), so training keeps its core."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):  # not Linux, or not allowed: run at normal priority
        pass


class ReturnTracker:
    """Accumulates the return of every finished episode, grouped by goal and by update: ``sums[u, g]`` /
    ``counts[u, g]`` are the total return / number of episodes of goal ``g`` that ended during update ``u``."""

    def __init__(self, num_goals: int, envs_per_goal: int, num_updates: int):
        self.G, self.N = num_goals, envs_per_goal
        self.goal_of_env = np.repeat(np.arange(num_goals), envs_per_goal)  # (E,)
        self.running = np.zeros(num_goals * envs_per_goal)  # (E,) return of the unfinished episodes
        self.sums = np.zeros((num_updates, num_goals))  # (U, G)
        self.counts = np.zeros((num_updates, num_goals))  # (U, G)

    def add(self, r: Rollout) -> None:
        """Record one update's rollout (time-major ``(T, E)`` arrays)."""
        for t in range(r.reward.shape[0]):
            self.running += r.reward[t]
            done = np.flatnonzero(r.terminated[t] | r.truncated[t])
            if done.size:
                goal = self.goal_of_env[done]
                self.sums[r.update] += np.bincount(goal, weights=self.running[done], minlength=self.G)
                self.counts[r.update] += np.bincount(goal, minlength=self.G)
                self.running[done] = 0.0

    def mean_return(self, start: int, stop: int) -> np.ndarray:
        """Mean return per goal ``(G,)`` of the episodes that ended in updates ``[start, stop)`` (nan if none)."""
        s, c = self.sums[start:stop].sum(0), self.counts[start:stop].sum(0)  # (G,), (G,)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(c > 0, s / np.maximum(c, 1), np.nan)

    def final_return(self, fraction: float = 0.05) -> np.ndarray:
        """Mean return per goal ``(G,)`` over the last ``fraction`` of the training updates."""
        U = self.sums.shape[0]
        return self.mean_return(U - max(1, int(round(U * fraction))), U)

    def curves(self, points: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """Binned learning curves: (update at each bin end ``(P,)``, mean return ``(P, G)``)."""
        U = self.sums.shape[0]
        edges = np.unique(np.linspace(0, U, min(points, U) + 1).astype(int))  # (P+1,)
        curve = np.stack([self.mean_return(a, b) for a, b in zip(edges[:-1], edges[1:])])  # (P, G)
        return edges[1:], curve
