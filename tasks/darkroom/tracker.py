"""Episode-return bookkeeping during A2C training: per-update, per-goal sums of finished episodes."""
from __future__ import annotations

import numpy as np

from tasks.darkroom.a2c import Rollout


class ReturnTracker:
    """Accumulates the return of every finished episode, grouped by goal and by update.

    ``sums[u, g]`` / ``counts[u, g]``: total return / number of episodes of goal ``g`` that ended
    during update ``u``; enough for learning curves and for the "last 5% of the stream" figure.
    """

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
