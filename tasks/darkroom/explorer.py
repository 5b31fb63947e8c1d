"""A source algorithm that explores DarkRoom systematically: the nearest-unvisited explorer.

An optimistic, model-based agent (R-max-like) that knows the room's moves but not where the goal is. Each stream
keeps the set of cells it has stepped on, across episodes: until rewarded at the goal it walks to the nearest
unvisited cell (Manhattan distance, ties broken at random) by a random move that brings it closer; once rewarded
it walks to the goal and stays there. Each action is replaced by a uniformly random one with probability
``epsilon`` before the goal is found and ``epsilon_after_goal`` after (docs/experiments/darkroom.md).
Every stream of one goal runs vectorised, with a generator seeded by (seed, row, col).
"""
from __future__ import annotations

import numpy as np

from tasks.grid.room import NUM_ACTIONS, start_cell, transition_table

#: History columns of one goal, in the store's dtypes.
COLUMN_TYPES = {"stream": np.int32, "update": np.int64, "episode": np.int32, "step": np.int32, "state": np.int16,
                "action": np.int8, "reward": np.float32, "terminated": np.bool_, "truncated": np.bool_,
                "logprob": np.float32}


def explore_goal(size: int, goal: tuple[int, int], streams: int, episodes: int, episode_length: int,
                 epsilon: float, epsilon_after_goal: float, seed: int, random_start: bool = False,
                 terminate_on_goal: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Histories of ``streams`` explorers on one goal: history columns (stream-major, time-ordered) and the return of
    every episode (streams, episodes); ``logprob`` is the exact log-probability of each action under the explorer's
    epsilon-mixed policy."""
    S, A = size * size, NUM_ACTIONS
    next_cell = transition_table(size)  # (S, A)
    rows, cols = np.divmod(np.arange(S), size)
    dist = np.abs(rows[:, None] - rows[None]) + np.abs(cols[:, None] - cols[None])  # (S, S) Manhattan = moves
    goal_cell = goal[0] * size + goal[1]
    centre = start_cell(size)[0] * size + start_cell(size)[1]
    rng = np.random.default_rng([seed, goal[0], goal[1]])
    K, lanes = streams, np.arange(streams)
    visited = np.zeros((K, S), bool)
    found = np.zeros(K, bool)
    target = np.full(K, -1)
    T = episodes * episode_length  # upper bound on rows per stream
    out = {name: np.zeros((K, T), dtype) for name, dtype in COLUMN_TYPES.items()}
    length = np.zeros(K, np.int64)  # rows written per stream
    returns = np.zeros((K, episodes))
    for e in range(episodes):
        cell = rng.integers(0, S, K) if random_start else np.full(K, centre)  # (K,)
        visited[lanes, cell] = True
        alive = np.ones(K, bool)  # False once an episode has terminated at the goal
        for t in range(episode_length):
            retarget = ~found & ((target < 0) | visited[lanes, np.maximum(target, 0)])  # (K,)
            if retarget.any():
                score = np.where(visited[retarget], np.iinfo(np.int64).max // 2, dist[cell[retarget]])  # (k, S)
                target[retarget] = np.argmin(score + 0.5 * rng.random(score.shape), axis=1)  # random ties
            target = np.where(found, goal_cell, target)
            here = dist[cell, target]  # (K,)
            closer = dist[next_cell[cell], target[:, None]] < here[:, None]  # (K, A); action 0 (noop) never closer
            closer[:, 0] = here == 0  # at the target: stay
            choice = np.argmax(np.where(closer, rng.random((K, A)), -1.0), axis=1)  # (K,) uniform among closer
            eps = np.where(found, epsilon_after_goal, epsilon)  # (K,)
            action = np.where(rng.random(K) < eps, rng.integers(0, A, K), choice)  # (K,)
            prob = (1.0 - eps) * closer[lanes, action] / closer.sum(axis=1) + eps / A  # (K,)
            new = next_cell[cell, action]  # (K,)
            reward = (new == goal_cell).astype(np.float32)
            terminated = (reward > 0) & terminate_on_goal
            rows_now = lanes[alive]
            at = length[rows_now]
            for name, value in (("stream", lanes), ("update", e), ("episode", e), ("step", t), ("state", cell),
                                ("action", action), ("reward", reward), ("terminated", terminated),
                                ("truncated", (t == episode_length - 1) & ~terminated), ("logprob", np.log(prob))):
                out[name][rows_now, at] = np.broadcast_to(value, (K,))[rows_now]
            length[rows_now] += 1
            returns[rows_now, e] += reward[rows_now]
            found |= (reward > 0) & alive
            visited[rows_now, new[rows_now]] = True
            cell = np.where(alive, new, cell)
            alive &= ~terminated
            if not alive.any():
                break
    columns = {name: np.concatenate([out[name][k, :length[k]] for k in range(K)]) for name in COLUMN_TYPES}
    return columns, returns
