"""Synthetic DarkRoom-like learning histories, for tests, benchmarks and examples.

Each stream is a noisy agent in a 9x9 room whose chance of walking straight to the
goal grows over the history, so returns improve like a real learner's. Fully
vectorised numpy: 10M transitions take about a second.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.history import ColumnSpec, HistorySpec, HistoryWriter

SPEC = HistorySpec(ColumnSpec.discrete(81), ColumnSpec.discrete(5), extra={"value": "float32"})


def synthetic_columns(rng: np.random.Generator, num_streams: int, length: int, goal: tuple[int, int],
                      size: int = 9, episode_length: int = 20,
                      with_value: bool = True) -> dict[str, np.ndarray]:
    """Columns of ``num_streams`` streams of ``length`` transitions each (stream-major order)."""
    n = num_streams * length
    t = np.tile(np.arange(length), num_streams)  # (n,) time within stream
    step = (t % episode_length).astype(np.int32)
    episode = (t // episode_length).astype(np.int32)
    update = (t // 100).astype(np.int64)  # one policy version per 100 transitions of a stream
    skill = np.clip(update * 100 / max(length - 1, 1) * 1.2, 0, 1) * 4.0  # greedy-action logit bonus
    bias = rng.normal(0, 0.5, (size * size, 5))  # per-state preferences of the policy
    states = np.zeros(n, np.int64)
    actions = np.zeros(n, np.int64)
    rewards = np.zeros(n, np.float32)
    logprob = np.zeros(n, np.float32)
    r_pos = np.full(n, size // 2)
    c_pos = np.full(n, size // 2)
    for k in range(episode_length):
        sel = np.flatnonzero(step == k)
        r, c = r_pos[sel], c_pos[sel]
        state = r * size + c
        states[sel] = state
        want = np.where(r > goal[0], 1, np.where(r < goal[0], 3, np.where(c < goal[1], 2, np.where(c > goal[1], 4, 0))))
        logits = bias[state] + skill[sel, None] * (np.arange(5) == want[:, None])  # (m, 5)
        logits -= logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))  # (m, 5) log-softmax
        act = np.argmax(logp + rng.gumbel(size=logp.shape), axis=1)  # sample from the policy
        actions[sel] = act
        logprob[sel] = logp[np.arange(len(sel)), act]
        dr = np.select([act == 1, act == 3], [-1, 1], 0)
        dc = np.select([act == 2, act == 4], [1, -1], 0)
        r, c = np.clip(r + dr, 0, size - 1), np.clip(c + dc, 0, size - 1)
        rewards[sel] = ((r == goal[0]) & (c == goal[1])).astype(np.float32)
        nxt = sel + 1
        inside = nxt < n
        r_pos[nxt[inside]], c_pos[nxt[inside]] = r[inside], c[inside]
    columns = {"stream": np.repeat(np.arange(num_streams, dtype=np.int32), length), "update": update,
               "episode": episode, "step": step, "state": states, "action": actions, "reward": rewards,
               "terminated": np.zeros(n, bool), "truncated": step == episode_length - 1, "logprob": logprob}
    if with_value:
        columns["value"] = rng.random(n).astype(np.float32)
    return columns


def write_synthetic(out: Any, num_tasks: int = 4, num_streams: int = 4, length: int = 2000, seed: int = 0,
                    heldout: int = 1, shard_rows: int = 1 << 20, with_value: bool = True) -> HistoryWriter:
    """Write a synthetic DarkRoom-like dataset with ``num_tasks`` goals (tasks) and one run each."""
    rng = np.random.default_rng(seed)
    cells = [(r, c) for r in range(9) for c in range(9) if (r, c) != (4, 4)]
    goals = [cells[i] for i in rng.permutation(len(cells))[:num_tasks]]
    names = [f"synthetic9-g{r}-{c}" for r, c in goals]
    metadata = {"task_spec": {"size": 9, "episode_length": 20, "synthetic": True},
                "source": {"algorithm": "synthetic", "config": {"num_streams": num_streams, "length": length}},
                "seeds": [seed], "split": {"train": names[heldout:], "heldout": names[:heldout]},
                "tasks": {name: {"goal": list(goal), "optimal_return": 21 - abs(goal[0] - 4) - abs(goal[1] - 4)}
                          for name, goal in zip(names, goals)}}
    spec = SPEC if with_value else HistorySpec(SPEC.state, SPEC.action)
    writer = HistoryWriter(out, spec, family="synthetic", metadata=metadata, shard_rows=shard_rows)
    for name, goal in zip(names, goals):
        if writer.is_complete(name, 0):
            continue
        with writer.unit(name, 0) as unit:
            unit.append(synthetic_columns(rng, num_streams, length, goal, with_value=with_value))
    writer.close()
    return writer
