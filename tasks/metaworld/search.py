"""The search source: a learner that finds a hidden reach goal from the reward alone, for learning histories whose
improvement an in-context learner can copy.

The noise source (:mod:`tasks.metaworld.noise`) steers Meta-World's scripted expert, which reads the goal, so its
noisy actions point at the goal and a transformer trained on them learns to read the goal off the actions in its
context, a cue its own actions never carry on a held-out goal. This source never sees the goal. It moves the hand
and keeps, over its whole history, the position whose step earned the highest reward (reach skills reward the
fingertips' distance to the goal, and nothing else, so that is the closest position visited). Reach rewards
saturate: every position within 5 cm of the goal earns the same maximum. With ``memory="first"`` the source keeps
the first position that earned the highest reward (near the edge of that ball when the reward saturates); with
``memory="mean"`` it keeps the mean of every position that earned exactly the highest reward so far, which lies
inside the ball (a mean of points of a convex set) and moves towards its centre as the search explores it (without
ties the two are the same):

- each episode starts by steering the hand to that best position (the first episode: to the centre of the skill's
  goal space, the task distribution's prior), with actions ``clip(gain * (target - hand), -1, 1)``;
- once within :data:`ARRIVED` of it, it runs and tumbles, as bacteria climb a chemical gradient: it moves at full
  speed in a direction and keeps the direction while the reward rises, and draws a new uniformly random direction
  when the reward does not rise.

Every action is that mean plus Gaussian noise of std ``sigma``, clipped to the action box (the gripper's mean is
0); ``logprob`` is the action's log-density under that clipped Gaussian given the source's state (its target, phase
and direction), :func:`tasks.metaworld.noise.clipped_gaussian_logprob`.
"""
from __future__ import annotations

import numpy as np

from ad.errors import UserError

#: Skills whose reward depends on the fingertips' distance to the goal alone (Meta-World's reach rewards, both
#: reward-function versions), so the best-rewarded position is the closest one visited.
SEARCH_SKILLS = ("reach-v3", "reach-wall-v3")
#: Distance (m) to the target at which the approach ends and the run-and-tumble search starts.
ARRIVED = 0.02
#: What ``--search-memory`` takes: which best-rewarded position the source keeps.
MEMORIES = ("first", "mean")
#: Gain of the approach: a full action moves the hand about 1 cm a step, reached 2 cm from the target.
GAIN = 50.0


def check_search_skill(skill: str) -> str:
    """``skill`` if the search source can run on it, else a UserError naming the skills it can."""
    if skill not in SEARCH_SKILLS:
        raise UserError(f"--source search needs a skill whose reward measures the hand's distance to the goal "
                        f"alone; {skill!r} is not one; use --skill {' or '.join(SEARCH_SKILLS)}, or --source noise")
    return skill


class RunAndTumble:
    """The search state of ``N`` units stepped together; unit ``i`` draws from ``rngs[i]`` only, so its history
    does not depend on which units run beside it.

    ``centre`` (3,) is where the first episode's approach goes (the goal space's centre), ``sigma`` the action
    noise's std, ``memory`` which best-rewarded position is kept (:data:`MEMORIES`, see the module's docstring).
    """

    def __init__(self, rngs: list[np.random.Generator], centre: np.ndarray, sigma: float, memory: str = "first"):
        if memory not in MEMORIES:
            raise ValueError(f"memory must be one of {MEMORIES}, got {memory!r}")
        n = len(rngs)
        self.rngs, self.sigma, self.memory = rngs, float(sigma), memory
        self.best = np.tile(np.asarray(centre, dtype=np.float64), (n, 1))  # (N, 3) best position so far
        self.best_reward = np.full(n, -np.inf)  # (N,)
        self.best_sum = np.zeros((n, 3))  # (N, 3) sum of the positions that earned best_reward ("mean")
        self.best_count = np.zeros(n)  # (N,) how many they are
        self.target = self.best.copy()  # (N, 3) this episode's approach target
        self.approaching = np.ones(n, dtype=bool)  # (N,)
        self.direction = np.zeros((n, 3))  # (N, 3) unit vectors of the run
        self.last_reward = np.full(n, -np.inf)  # (N,) reward of the previous search step

    def start_episode(self) -> None:
        """Every unit heads for its best position so far and will search from there."""
        self.target = self.best.copy()
        self.approaching[:] = True
        self.last_reward[:] = -np.inf
        self.direction = np.stack([self._random_direction(i) for i in range(len(self.rngs))])

    def act(self, hand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Actions (N, 4) at hand positions ``hand`` (N, 3): (action, its noise-free mean, its log-density)."""
        from tasks.metaworld.noise import clipped_gaussian_logprob

        n = len(self.rngs)
        offset = self.target - hand  # (N, 3)
        self.approaching &= np.linalg.norm(offset, axis=1) > ARRIVED
        move = np.where(self.approaching[:, None], np.clip(GAIN * offset, -1.0, 1.0), self.direction)  # (N, 3)
        mean = np.concatenate([move, np.zeros((n, 1))], axis=1)  # (N, 4)
        z = np.stack([rng.standard_normal(4) for rng in self.rngs])  # (N, 4)
        action = np.clip(mean + self.sigma * z, -1.0, 1.0)
        logprob = clipped_gaussian_logprob(action, mean, np.full(n, self.sigma))
        return action, mean, logprob

    def observe(self, reward: np.ndarray, hand_after: np.ndarray) -> None:
        """The step's reward (N,) and the hand position it was earned at (N, 3): keep the best position; a search
        step whose reward did not rise turns the unit to a new random direction."""
        better = reward > self.best_reward
        self.best_reward[better] = reward[better]
        if self.memory == "first":
            self.best[better] = hand_after[better]
        else:
            tie = ~better & (reward == self.best_reward)
            self.best_sum[better], self.best_count[better] = hand_after[better], 1.0
            self.best_sum[tie] += hand_after[tie]
            self.best_count[tie] += 1.0
            kept = better | tie
            self.best[kept] = self.best_sum[kept] / self.best_count[kept, None]
        searching = ~self.approaching
        for i in np.flatnonzero(searching & (reward <= self.last_reward)):
            self.direction[i] = self._random_direction(i)
        self.last_reward = np.where(searching, reward, -np.inf)

    def _random_direction(self, i: int) -> np.ndarray:
        u = self.rngs[i].standard_normal(3)
        return u / max(float(np.linalg.norm(u)), 1e-12)
