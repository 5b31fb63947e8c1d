"""RL format: contiguous windows of one stream, across episode boundaries, as arrays.

A :class:`WindowSource` holds the selected streams concatenated into flat columns plus the offsets where windows may
start, so a whole batch of windows is one gather (``flat[starts[:, None] + arange(T)]``). With ``optimal_actions``
(:attr:`ad.families.TaskFamily.optimal_actions`) the windows also carry ``action_targets``, the optimal action at
each row: the target of an objective that imitates an optimal policy (DPT); the posterior form of that target,
``action_target_probs``, is added per batch by :class:`ad.data.RLTrajectoryDataset`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ad.errors import UserError
from ad.history.reader import HistoryReader, Stream

#: RL-format keys and the history columns they come from.
RL_COLUMNS = {"states": "state", "actions": "action", "rewards": "reward", "logprobs": "logprob",
              "timesteps": "step"}
#: RL-format key of the optimal action at each row (windows built with ``optimal_actions`` only)
TARGETS = "action_targets"
#: RL-format key of each action's probability of being optimal at each row (B, T, A), given the window's rows before
#: it (:attr:`ad.families.TaskFamily.posterior_action_probs`; batches of a dataset built with it only)
TARGET_PROBS = "action_target_probs"
_READ = ["episode", "step", "state", "action", "reward", "logprob", "terminated", "truncated"]


def select_episodes(columns: dict[str, np.ndarray], every: int = 1,
                    last_fraction: float | None = None, min_rows: int = 0) -> dict[str, np.ndarray]:
    """Keep every ``every``-th episode of a stream, or only its last ``last_fraction`` of episodes (at least one, and
    with ``min_rows`` as many more last episodes as hold ``min_rows`` rows, where the stream has them).

    Subsampling (the AD paper's trick) makes the distilled history improve faster per episode
    than its source; ``last_fraction`` gives the expert-distillation baseline's data (``min_rows``: one window of
    it, where a short history's last fraction is shorter than a window).
    """
    episode = columns["episode"]
    if every == 1 and last_fraction is None:
        return columns
    ordinal = np.cumsum(np.diff(episode, prepend=episode[:1]) != 0)  # (N,) episode ordinal of each row, 0..E-1
    num_episodes = int(ordinal[-1]) + 1 if len(ordinal) else 0
    keep = np.ones(len(episode), bool)
    if every > 1:
        keep &= ordinal % every == 0
    if last_fraction is not None:
        kept = max(1, int(round(num_episodes * last_fraction)))
        if min_rows > 0:
            rows = np.bincount(ordinal[keep], minlength=num_episodes)[::-1].cumsum()  # (E,) rows of the last k+1
            kept = max(kept, min(int(np.searchsorted(rows, min_rows)) + 1, num_episodes))
        keep &= ordinal >= num_episodes - kept
    return {name: values[keep] for name, values in columns.items()}


@dataclass
class WindowSource:
    """Flat RL-format columns of many streams and the valid window start offsets.

    Attributes:
        columns: RL key -> flat array over all selected streams (N,) or (N, D) for vector states.
        starts: (W,) int64 flat offsets where a full window of ``window`` transitions begins.
        window: window length in transitions.
        stream_of_start: (W,) index into ``streams`` of each window.
        streams: (task, run, stream) of each selected stream.
        history_starts: (S,) index into ``starts`` of the window that begins at each selected stream's first row.
    """

    columns: dict[str, np.ndarray]
    starts: np.ndarray
    window: int
    stream_of_start: np.ndarray
    streams: list[tuple[str, int, int]]
    history_starts: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def gather(self, indices: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """Windows number ``indices`` as arrays (B, T) or (B, T, D), plus an all-true mask."""
        idx = self.starts[np.asarray(indices, dtype=np.int64)]  # (B,)
        positions = idx[:, None] + np.arange(self.window)  # (B, T)
        batch = {key: values[positions] for key, values in self.columns.items()}
        batch["mask"] = np.ones(positions.shape, dtype=bool)
        return batch


def build_window_source(streams: Sequence[Stream], window: int, stride: int = 1, every: int = 1,
                        last_fraction: float | None = None, where: str = "dataset",
                        targets: Callable[[Stream], np.ndarray] | None = None) -> WindowSource:
    """Concatenate streams (after episode selection) and index every full window at ``stride``; ``targets(stream)``
    (if given) is the (T,) optimal action of each row of a whole stream, kept as ``action_targets``."""
    if window < 1 or stride < 1:
        raise UserError(f"window ({window}) and stride ({stride}) must be at least 1")
    keys = {**RL_COLUMNS, **({TARGETS: TARGETS} if targets is not None else {})}
    flat: dict[str, list[np.ndarray]] = {key: [] for key in keys}
    starts, owners, names, firsts = [], [], [], []
    offset, longest, count = 0, 0, 0
    for stream in streams:
        columns = stream.columns if targets is None else {**stream.columns, TARGETS: targets(stream)}
        cols = select_episodes(columns, every, last_fraction, min_rows=window)  # targets first: they may read
        # earlier episodes
        n = len(cols["episode"])
        longest = max(longest, n)
        if n < window:
            continue
        index = len(names)
        names.append((stream.task, stream.run, stream.stream))
        for key, column in keys.items():
            flat[key].append(cols[column])
        local = np.arange(0, n - window + 1, stride, dtype=np.int64)  # local[0] == 0: the stream's first row
        starts.append(local + offset)
        owners.append(np.full(len(local), index, dtype=np.int64))
        firsts.append(count)
        offset, count = offset + n, count + len(local)
    if not names:
        raise UserError(f"window of {window} transitions is longer than every stream in {where} (longest "
                        f"{longest} after episode selection); use a shorter window or fewer skipped episodes")
    columns = {key: _concat(parts, key) for key, parts in flat.items()}
    return WindowSource(columns, np.concatenate(starts), window, np.concatenate(owners), names,
                        np.asarray(firsts, dtype=np.int64))


def _concat(parts: list[np.ndarray], key: str) -> np.ndarray:
    values = np.concatenate(parts)
    if key in ("states", "actions"):
        return values.astype(np.int64) if values.dtype.kind in "iu" else values.astype(np.float32)
    if key in ("timesteps", TARGETS):
        return values.astype(np.int64)
    return values.astype(np.float32)


def load_window_source(reader: HistoryReader, tasks: Sequence[str], window: int, stride: int = 1,
                       every: int = 1, last_fraction: float | None = None,
                       optimal_actions: Callable[[dict, str, dict], Any] | None = None) -> WindowSource:
    """Read ``tasks`` from a dataset and index their RL-format windows (with ``action_targets`` from the family's
    ``optimal_actions(metadata, task, stream columns)`` if given)."""
    kind = reader.spec.state.kind
    numeric = ("discrete", "vector")
    if kind not in numeric or reader.spec.action.kind not in numeric or reader.spec.logprob != "scalar":
        raise UserError(f"dataset {reader.location.base} has {kind} states / {reader.spec.action.kind} actions; "
                        "the RL format here needs discrete or vector states and actions: "
                        "use the Language format (LanguageTrajectoryDataset) for text histories")
    streams = reader.streams(tasks=tasks, columns=_READ)
    targets = None if optimal_actions is None else (
        lambda stream: np.asarray(optimal_actions(reader.metadata, stream.task, stream.columns), dtype=np.int64))
    return build_window_source(streams, window, stride, every, last_fraction, where=reader.location.base,
                               targets=targets)


def to_torch(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    """numpy RL batch -> torch tensors (int64 for discrete, float32 otherwise)."""
    import torch

    return {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in batch.items()}
