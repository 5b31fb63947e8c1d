"""The nearest-unvisited explorer of the grid rooms: a source that searches a dark room systematically for the cells
it must reach in order (DarkRoom: the goal; Key-to-Door: the key, then the door).

An optimistic, model-based agent (R-max-like) that knows the room's moves but not where its hidden cells are. The
cell it is looking for next is its *phase* (0 at every episode's start; Key-to-Door's 1 once the key is carried).
For each phase every stream keeps, across episodes, the cells it has stepped on in that phase without being rewarded
there: until rewarded at the phase's cell it walks to the nearest cell not yet searched in that phase (Manhattan
distance, ties broken at random) by a random move that brings it closer; once rewarded there it knows the cell and
walks to it in every later episode. Reaching the last cell ends the episode with ``terminate_at_last``, else the
agent stays there (DarkRoom's every step on the goal rewarded). Each action is replaced by a uniformly random one
with probability ``epsilon`` while the phase's cell is unknown and ``epsilon_after`` once it is known.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tasks.grid.room import NUM_ACTIONS, start_cell, transition_table

#: History columns of one task, in the store's dtypes, and each state's phase (``phase``: the hidden cells already
#: reached in the episode before the state's action).
COLUMN_TYPES = {"stream": np.int32, "update": np.int64, "episode": np.int32, "step": np.int32, "state": np.int16,
                "action": np.int8, "reward": np.float32, "terminated": np.bool_, "truncated": np.bool_,
                "logprob": np.float32, "phase": np.int8}


def explore(size: int, hidden: Sequence[int], streams: int, episodes: int, episode_length: int, epsilon: float,
            epsilon_after: float, rng: np.random.Generator, random_start: bool = False,
            terminate_at_last: bool = False, start_searched: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Histories of ``streams`` explorers on one task whose ``hidden`` cells (indices ``row * size + col``) must be
    reached in order, each rewarded 1 on arrival in its phase: history columns (stream-major, time-ordered; see
    :data:`COLUMN_TYPES`) and the return of every episode (streams, episodes). ``logprob`` is the exact
    log-probability of each action under the explorer's epsilon-mixed policy. ``start_searched`` counts each
    episode's start cell as searched in phase 0 (DarkRoom, whose goal is never the start cell)."""
    S, A, M = size * size, NUM_ACTIONS, len(hidden)
    next_cell = transition_table(size)  # (S, A)
    rows, cols = np.divmod(np.arange(S), size)
    dist = np.abs(rows[:, None] - rows[None]) + np.abs(cols[:, None] - cols[None])  # (S, S) Manhattan = moves
    cells = np.asarray(hidden, np.int64)  # (M,)
    centre = start_cell(size)[0] * size + start_cell(size)[1]
    K, lanes = streams, np.arange(streams)
    searched = np.zeros((K, M, S), bool)  # cells stepped on in a phase without its reward
    known = np.zeros((K, M), bool)  # the phase's cell found
    target = np.full(K, -1)
    phase = np.zeros(K, np.int64)
    T = episodes * episode_length  # upper bound on rows per stream
    out = {name: np.zeros((K, T), dtype) for name, dtype in COLUMN_TYPES.items()}
    length = np.zeros(K, np.int64)  # rows written per stream
    returns = np.zeros((K, episodes))
    for e in range(episodes):
        cell = rng.integers(0, S, K) if random_start else np.full(K, centre)  # (K,)
        target = np.where(phase == 0, target, -1)  # a new episode looks for the first cell again
        phase[:] = 0
        if start_searched:
            searched[lanes, 0, cell] = True
        alive = np.ones(K, bool)  # False once an episode has terminated at the last cell
        for t in range(episode_length):
            found = known[lanes, phase]  # (K,)
            retarget = ~found & ((target < 0) | searched[lanes, phase, np.maximum(target, 0)])  # (K,)
            if retarget.any():
                score = np.where(searched[retarget, phase[retarget]], np.iinfo(np.int64).max // 2,
                                 dist[cell[retarget]])  # (k, S)
                target[retarget] = np.argmin(score + 0.5 * rng.random(score.shape), axis=1)  # random ties
            target = np.where(found, cells[phase], target)
            here = dist[cell, target]  # (K,)
            closer = dist[next_cell[cell], target[:, None]] < here[:, None]  # (K, A); action 0 (noop) never closer
            closer[:, 0] = here == 0  # at the target: stay
            choice = np.argmax(np.where(closer, rng.random((K, A)), -1.0), axis=1)  # (K,) uniform among closer
            eps = np.where(found, epsilon_after, epsilon)  # (K,)
            action = np.where(rng.random(K) < eps, rng.integers(0, A, K), choice)  # (K,)
            prob = (1.0 - eps) * closer[lanes, action] / closer.sum(axis=1) + eps / A  # (K,)
            new = next_cell[cell, action]  # (K,)
            hit = new == cells[phase]  # (K,) the phase's cell reached
            reward = hit.astype(np.float32)
            terminated = hit & (phase == M - 1) & terminate_at_last
            rows_now = lanes[alive]
            at = length[rows_now]
            for name, value in (("stream", lanes), ("update", e), ("episode", e), ("step", t), ("state", cell),
                                ("action", action), ("reward", reward), ("terminated", terminated),
                                ("truncated", (t == episode_length - 1) & ~terminated), ("logprob", np.log(prob)),
                                ("phase", phase)):
                out[name][rows_now, at] = np.broadcast_to(value, (K,))[rows_now]
            length[rows_now] += 1
            returns[rows_now, e] += reward[rows_now]
            known[lanes, phase] |= hit & alive
            searched[rows_now, phase[rows_now], new[rows_now]] = True
            advance = hit & alive & (phase < M - 1)  # on to the next hidden cell, which is not this one
            phase = phase + advance
            target = np.where(advance, -1, target)
            searched[lanes[advance], phase[advance], new[advance]] = True
            cell = np.where(alive, new, cell)
            alive &= ~terminated
            if not alive.any():
                break
    columns = {name: np.concatenate([out[name][k, :length[k]] for k in range(K)]) for name in COLUMN_TYPES}
    return columns, returns
