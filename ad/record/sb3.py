"""A Stable-Baselines3 callback that records ``model.learn`` as a learning history.

What each column means per algorithm (env slot ``i`` of SB3's vector env is stream ``i``):

- ``update``: the number of training phases (calls of the algorithm's ``train``) made before the action was
  chosen: one per rollout for PPO and A2C; for SAC and DQN one per rollout (``train_freq`` steps) once
  ``learning_starts`` steps were collected.
- ``logprob``:
  PPO / A2C: the log-probability of the sampled action under the policy's distribution (for Box actions the
  Gaussian log-density of the unclipped sample; the stored action is the clipped one the env received).
  SAC: the log-density of the action under the squashed (tanh) Gaussian, in the policy's [-1, 1] action scale;
  during the uniform warm-up, the uniform density there (``-dim * log 2``).
  DQN: the epsilon-greedy probability, ``eps / n + (1 - eps) * [action is greedy]`` (``1 / n`` in the warm-up).
- ``value`` (extra column): PPO / A2C the critic's V(s); SAC the smaller of its twin Q(s, a); DQN Q(s, a).

Observations are the ones the policy acted on (after SB3's own wrappers such as VecNormalize).

Cost: for PPO and A2C each env step keeps only its rewards, dones and infos; the observations, actions,
log-probabilities and values of a rollout are read from SB3's own rollout buffer (its public arrays) when the rollout
ends and recorded in one batch (:meth:`HistoryRecorder.steps`), the same rows a per-step record gives. SAC and DQN
are recorded step by step (their log-probabilities and values are not in SB3's replay buffer).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback

from ad.errors import UserError
from ad.record.recorder import HistoryRecorder

SUPPORTED = ("PPO", "A2C", "SAC", "DQN")


class HistoryCallback(BaseCallback):
    """Records every env step of an SB3 ``learn`` call into a :class:`HistoryRecorder` (commit it with
    ``recorder.close()`` after ``learn`` returns)."""

    def __init__(self, recorder: HistoryRecorder, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.recorder = recorder
        self.updates = 0
        self._rollouts = 0
        self._trained = False
        self._kind = ""
        self._rollout: list[tuple[np.ndarray, np.ndarray, Any]] = []  # PPO / A2C: (rewards, dones, infos) a step
        recorder._before_close.append(self._record_rollout)  # a rollout cut short is recorded when it closes

    def on_training_start(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        if self._rollout:  # a rollout an exception cut short in an earlier learn call, read before its locals go
            self._record_rollout()
        super().on_training_start(locals_, globals_)

    def _on_training_start(self) -> None:
        name = type(self.model).__name__
        if name not in SUPPORTED:
            raise UserError(f"the history callback records {', '.join(SUPPORTED)}, not {name}")
        self.recorder._check_open()  # a unit already complete is refused before any training
        self._kind = name

    def _on_rollout_start(self) -> None:
        if self._rollouts and self._trained:
            self.updates += 1
        self._rollouts += 1

    def _on_rollout_end(self) -> None:
        model = self.model
        if self._kind in ("PPO", "A2C"):
            self._trained = True
            self._record_rollout()
        else:
            self._trained = model.num_timesteps > model.learning_starts and model.gradient_steps != 0

    def _on_training_end(self) -> None:
        self._record_rollout()  # a rollout cut short (another callback stopped training)

    def _on_step(self) -> bool:
        loc = self.locals
        if self._kind in ("PPO", "A2C"):  # the rest of the step is read from the rollout buffer at the rollout's end
            # copies: SB3 adds the bootstrapped value to a truncated step's reward in place after this call
            self._rollout.append((loc["rewards"].copy(), loc["dones"].copy(), loc["infos"]))
            return True
        dones = np.asarray(loc["dones"], dtype=bool)
        truncated = dones.copy()
        if dones.any():
            truncated &= np.array([bool(info.get("TimeLimit.truncated", False)) for info in loc["infos"]])
        terminated = dones & ~truncated
        obs = self.model._last_obs  # the observation the action was sampled in (SB3 keeps it until after this call)
        action = loc["actions"]
        logprob, value = (self._sac if self._kind == "SAC" else self._dqn)(obs, loc)
        self.recorder.step(obs, action, loc["rewards"], terminated, truncated, logprob=logprob,
                           update=self.updates, value=value if self.recorder.value else None)
        return True

    def _record_rollout(self) -> None:
        """PPO / A2C: record the steps of the rollout so far, reading what each step acted on from SB3's rollout
        buffer (observations, actions, log-probabilities and values as the policy produced them)."""
        steps, self._rollout = self._rollout, []
        if not steps:
            return
        buffer = self.model.rollout_buffer
        added = buffer.buffer_size if buffer.full else buffer.pos
        T = len(steps)
        if not T - 1 <= added <= T:
            raise RuntimeError(f"the history callback saw {T} steps of this rollout but SB3's rollout buffer holds "
                               f"{added}; record with one callback per learn call")
        rewards = np.stack([s[0] for s in steps])  # (T, n_envs)
        dones = np.stack([s[1] for s in steps]).astype(bool, copy=False)
        truncated = np.zeros_like(dones)
        for t, e in zip(*np.nonzero(dones)):
            truncated[t, e] = bool(steps[t][2][e].get("TimeLimit.truncated", False))
        terminated = dones & ~truncated
        if added:
            self.recorder.steps(buffer.observations[:added], self._env_actions(buffer.actions[:added]),
                                rewards[:added], terminated[:added], truncated[:added],
                                logprob=buffer.log_probs[:added], update=self.updates,
                                value=buffer.values[:added] if self.recorder.value else None)
        if added < T:  # training stopped at the last step, before SB3 stored it: as SB3 made it (its locals)
            loc = self.locals
            self.recorder.step(loc["obs_tensor"], loc["clipped_actions"], rewards[-1], terminated[-1], truncated[-1],
                               logprob=loc["log_probs"], update=self.updates,
                               value=loc["values"] if self.recorder.value else None)

    def _env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Buffered actions (T, n_envs, dim) as the env received them: SB3 clips a Box action to the space's
        bounds (or unscales it from [-1, 1] for a squashing policy) before the step and stores the raw one."""
        from gymnasium import spaces

        space = self.model.action_space
        if not isinstance(space, spaces.Box):
            return actions
        actions = actions.reshape(*actions.shape[:2], *space.shape)
        if self.model.policy.squash_output:
            return self.model.policy.unscale_action(actions)
        return np.clip(actions, space.low, space.high)

    def _warmup(self) -> bool:
        """Whether this step's action was sampled in the warm-up (uniformly at random)."""
        model = self.model
        return model.num_timesteps - model.n_envs < model.learning_starts

    @torch.no_grad()
    def _sac(self, obs: Any, loc: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        policy = self.model.policy
        obs_t = policy.obs_to_tensor(obs)[0]
        scaled = torch.as_tensor(np.asarray(loc["buffer_actions"]), dtype=torch.float32)
        if self._warmup():
            logprob = np.full(len(scaled), -scaled.shape[1] * math.log(2.0))
        else:
            mean, log_std, kwargs = policy.actor.get_action_dist_params(obs_t)
            dist = policy.actor.action_dist.proba_distribution(mean, log_std, **kwargs)
            logprob = _numpy(dist.log_prob(scaled.clamp(-1 + 1e-6, 1 - 1e-6)))
        q = torch.cat(policy.critic(obs_t, scaled), dim=1).min(dim=1).values
        return logprob, _numpy(q)

    @torch.no_grad()
    def _dqn(self, obs: Any, loc: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        policy = self.model.policy
        q = policy.q_net(policy.obs_to_tensor(obs)[0])  # (n_envs, n_actions)
        actions = np.asarray(loc["actions"]).reshape(-1)
        n = q.shape[1]
        eps = 1.0 if self._warmup() else float(self.model.exploration_rate)
        greedy = _numpy(q.argmax(dim=1)) == actions
        prob = eps / n + (1.0 - eps) * greedy
        return np.log(prob), _numpy(q[torch.arange(len(actions)), torch.as_tensor(actions)])


def _numpy(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
