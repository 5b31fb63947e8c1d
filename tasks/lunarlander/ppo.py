"""PPO on many tasks at once: one actor-critic per task, every task's forward and backward one batched computation.

Each parameter has a leading task dimension (``W: (T, in, out)``), so a layer of all T networks is one
``torch.baddbmm``; the loss is the sum of the T tasks' own PPO losses, so each task's gradient is its own, and Adam
(elementwise) with a per-task gradient-norm clip keeps the T learners independent. Every random draw of task ``t``
(initial weights, sampled actions, minibatch order) comes from generators seeded by that task's seed only, so a
task's learning history does not depend on which other tasks share the batch.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ad.errors import UserError


def _layer(gen: torch.Generator, fan_in: int, fan_out: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """nn.Linear's uniform init (bound 1/sqrt(fan_in)) times ``scale``, as (in, out) weight and (1, out) bias."""
    bound = scale / math.sqrt(fan_in)
    w = (torch.rand(fan_in, fan_out, generator=gen) * 2 - 1) * bound
    b = (torch.rand(1, fan_out, generator=gen) * 2 - 1) * bound
    return w, b


class BatchedPPO:
    """T independent PPO learners (discrete actions) with tanh MLP actor and critic, stepped together.

    Args:
        cfg: a :class:`tasks.lunarlander.config.GenerateConfig` (the PPO options).
        seeds: one seed per task.
        obs_dim: observation size; num_actions: number of discrete actions.
    """

    def __init__(self, cfg: Any, seeds: list[int], obs_dim: int, num_actions: int) -> None:
        self.cfg, self.T, self.A, self.obs_dim = cfg, len(seeds), num_actions, obs_dim
        H = cfg.hidden
        #: actor obs->H->H->A (last layer scaled 0.01: near-uniform first policy), critic obs->H->H->1
        sizes = [(obs_dim, H, 1.0), (H, H, 1.0), (H, num_actions, 0.01), (obs_dim, H, 1.0), (H, H, 1.0), (H, 1, 1.0)]
        per_task = []
        for s in seeds:
            gen = torch.Generator().manual_seed(int(s))
            per_task.append([_layer(gen, i, o, k) for i, o, k in sizes])
        self.params: list[torch.Tensor] = []
        for j in range(len(sizes)):
            for k in range(2):  # weight, bias stacked over tasks: (T, in, out), (T, 1, out)
                self.params.append(torch.stack([p[j][k] for p in per_task]).requires_grad_(True))
        self.opt = torch.optim.Adam(self.params, lr=cfg.learning_rate, eps=1e-5)
        self.rngs = [np.random.default_rng([int(s), 1]) for s in seeds]
        self.updates = 0  #: optimiser steps taken (the ``update`` column of the actions chosen next)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (T, B, A) and values (T, B) of observations (T, B, obs_dim)."""
        p = self.params
        h = torch.tanh(torch.baddbmm(p[1], obs, p[0]))  # (T, B, H)
        h = torch.tanh(torch.baddbmm(p[3], h, p[2]))
        logits = torch.baddbmm(p[5], h, p[4])  # (T, B, A)
        v = torch.tanh(torch.baddbmm(p[7], obs, p[6]))
        v = torch.tanh(torch.baddbmm(p[9], v, p[8]))
        return logits, torch.baddbmm(p[11], v, p[10]).squeeze(-1)  # (T, B)

    def uniforms(self, steps: int, streams: int) -> np.ndarray:
        """Each task's uniform draws for ``steps`` action samples of ``streams`` envs: (steps, T, streams)."""
        return np.stack([rng.random((steps, streams)) for rng in self.rngs], axis=1)

    @torch.no_grad()
    def act(self, obs: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sampled actions, their log-probabilities and the values, each (T, E), for observations (T, E, obs_dim)
        and uniforms ``u`` (T, E) (inverse-CDF sampling, so the draws are each task's own)."""
        logits, value = self.forward(torch.as_tensor(obs, dtype=torch.float32))
        logp = torch.log_softmax(logits, -1)  # (T, E, A)
        cdf = logp.exp().cumsum(-1)
        action = (torch.as_tensor(u, dtype=torch.float32)[..., None] > cdf).sum(-1).clamp_(max=self.A - 1)
        chosen = logp.gather(-1, action[..., None]).squeeze(-1)
        return action.numpy(), chosen.numpy(), value.numpy()

    @torch.no_grad()
    def value(self, obs: np.ndarray) -> np.ndarray:
        """Values (T, E) of observations (T, E, obs_dim)."""
        return self.forward(torch.as_tensor(obs, dtype=torch.float32))[1].numpy()

    def update(self, rollout: dict[str, np.ndarray], last_value: np.ndarray) -> dict[str, float]:
        """PPO epochs over one rollout: arrays (R, T, E, ...) ``obs``, ``action``, ``logprob``, ``value``, ``reward``
        (truncations already bootstrapped), ``done``; ``last_value`` (T, E) of the observation after the last step.
        Raises before any further step if a loss or parameter turns non-finite."""
        cfg = self.cfg
        reward, value, done = rollout["reward"], rollout["value"], rollout["done"].astype(np.float32)
        R = len(reward)
        adv = np.zeros_like(reward)
        last = np.zeros_like(reward[0])
        for t in reversed(range(R)):  # GAE
            nxt = last_value if t == R - 1 else value[t + 1]
            delta = reward[t] + cfg.gamma * nxt * (1 - done[t]) - value[t]
            last = delta + cfg.gamma * cfg.gae_lambda * (1 - done[t]) * last
            adv[t] = last

        def flat(x: np.ndarray) -> torch.Tensor:  # (R, T, E, ...) -> (T, R*E, ...)
            x = torch.as_tensor(np.ascontiguousarray(np.swapaxes(x, 0, 1)))
            return x.reshape(self.T, -1, *x.shape[3:])

        obs, action = flat(rollout["obs"]).float(), flat(rollout["action"]).long()
        old_logp, advantage = flat(rollout["logprob"]).float(), flat(adv).float()
        returns = advantage + flat(value).float()
        N = obs.shape[1]
        M = N // cfg.minibatches
        stats = {"loss": 0.0, "entropy": 0.0}
        for _ in range(cfg.epochs):
            order = torch.as_tensor(np.stack([rng.permutation(N) for rng in self.rngs]))  # (T, N)
            for k in range(cfg.minibatches):
                idx = order[:, k * M:(k + 1) * M]  # (T, M)
                o = obs.gather(1, idx[..., None].expand(-1, -1, obs.shape[-1]))
                a, lp0 = action.gather(1, idx), old_logp.gather(1, idx)
                adv_mb, ret = advantage.gather(1, idx), returns.gather(1, idx)
                adv_mb = (adv_mb - adv_mb.mean(1, keepdim=True)) / (adv_mb.std(1, keepdim=True) + 1e-8)
                logits, v = self.forward(o)
                logp_all = torch.log_softmax(logits, -1)
                ratio = (logp_all.gather(-1, a[..., None]).squeeze(-1) - lp0).exp()
                clipped = ratio.clamp(1 - cfg.clip, 1 + cfg.clip)
                policy_loss = torch.maximum(-adv_mb * ratio, -adv_mb * clipped).mean(1)  # (T,)
                value_loss = 0.5 * (v - ret).pow(2).mean(1)
                entropy = -(logp_all.exp() * logp_all).sum(-1).mean(1)
                loss = (policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy).sum()
                if not torch.isfinite(loss):
                    raise UserError(f"the PPO loss turned non-finite after {self.updates} updates; lower "
                                    "--learning-rate")
                self.opt.zero_grad(set_to_none=False)
                loss.backward()
                self._clip_per_task()
                self.opt.step()
                self.updates += 1
                stats["loss"] += float(loss.detach()) / self.T
                stats["entropy"] += float(entropy.detach().mean())
        if not all(torch.isfinite(p).all() for p in self.params):
            raise UserError(f"a learner's parameters turned non-finite after {self.updates} updates; lower "
                            "--learning-rate")
        steps = cfg.epochs * cfg.minibatches
        return {k: v / steps for k, v in stats.items()}

    @torch.no_grad()
    def _clip_per_task(self) -> None:
        """Scale each task's gradient to norm at most ``max_grad_norm`` (each task's own norm)."""
        sq = sum(p.grad.pow(2).flatten(1).sum(1) for p in self.params)  # (T,)
        scale = (self.cfg.max_grad_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
        for p in self.params:
            p.grad.mul_(scale.view(-1, *([1] * (p.dim() - 1))))
