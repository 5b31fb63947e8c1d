"""Batched A2C: one independent actor-critic per DarkRoom goal, all goals trained in one computation.

Agent (seed 004): a shared embedding layer (``hidden`` features per cell, then ReLU) feeding a
linear actor head and a linear critic head. Every goal ``g`` has its own parameters, stacked on a leading
``G`` dimension; one Adam step updates every agent, and gradient clipping is done per goal, so each
agent is exactly what it would be trained alone (``tests/test_darkroom_a2c.py`` checks it against
a plain ``nn.Module`` agent).

Parameters are fixed during a rollout and observations are discrete, so each update computes the
whole policy / value table ``(G, S, A)`` / ``(G, S)`` once; rollout steps are gathers from it.
The loss uses the rollout only through per-table-entry sums (``np.bincount``), so the backward
pass is over the table, not over every transition. Random numbers come from one ``torch.Generator`` per goal (seeded from the run seed and the goal
cell), drawn a block of updates at a time, so a goal's history does not depend on which other
goals share its batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from tasks.darkroom.goals import NUM_ACTIONS
from tasks.darkroom.vector_env import DarkRoomVectorEnv

#: Updates' worth of uniforms drawn per goal generator call (keeps the per-goal loop off the hot path).
_RNG_BLOCK = 256


@dataclass
class Rollout:
    """One update's transitions, time-major ``(T, E)`` numpy arrays (E = goals x envs per goal)."""

    update: int
    state: np.ndarray  # (T, E) int64 observation the action was taken in
    action: np.ndarray  # (T, E) int64
    reward: np.ndarray  # (T, E) float32
    terminated: np.ndarray  # (T, E) bool
    truncated: np.ndarray  # (T, E) bool
    logprob: np.ndarray  # (T, E) float32 log-probability of the action under the acting policy
    value: np.ndarray  # (T, E) float32 critic value of the state under the acting policy
    episode: np.ndarray  # (T, E) int64 episode index within the stream
    step: np.ndarray  # (T, E) int64 step within the episode


def goal_seed(seed: int, size: int, goal: tuple[int, int]) -> int:
    """The seed of one goal's agent: a function of the run seed and the goal only."""
    return int(np.random.SeedSequence([int(seed), int(size), int(goal[0]), int(goal[1])]).generate_state(1)[0])


def env_seeds(seed: int, size: int, goals: list[tuple[int, int]], envs_per_goal: int) -> list[int]:
    """Seeds of the sub-envs (goal-major), a function of the run seed and each sub-env's goal only."""
    return [goal_seed(seed, size, g) + i for g in goals for i in range(envs_per_goal)]


class BatchedA2C:
    """A2C agents for ``goals`` (one per goal), trained together on a :class:`DarkRoomVectorEnv`.

    Args:
        cfg: a config with the A2C fields of ``GenerateConfig`` (hidden, num_envs, num_steps, lr,
            adam_betas, adam_eps, max_grad_norm, ent_coef, vf_coef, gamma, gae_lambda) and the env
            fields (size, episode_length, random_start, terminate_on_goal).
        goals: goal cells, one agent each.
        seed: run seed; agent ``g``'s initial weights and action noise depend on (seed, goals[g]) only.
    """

    def __init__(self, cfg, goals: list[tuple[int, int]], seed: int):
        self.cfg = cfg
        self.goals = [tuple(int(x) for x in g) for g in goals]
        G, S, H, A = len(goals), cfg.size * cfg.size, cfg.hidden, NUM_ACTIONS
        self.G, self.S, self.A, self.N, self.T = G, S, A, cfg.num_envs, cfg.num_steps
        self.gens = [torch.Generator().manual_seed(goal_seed(seed, cfg.size, g)) for g in self.goals]

        # Per-goal parameters, initialised like nn.Embedding / nn.Linear, each from its goal's generator.
        bound = 1.0 / math.sqrt(H)
        init = [self._init_one(gen, S, H, A, bound) for gen in self.gens]
        self.embed = torch.stack([p[0] for p in init]).requires_grad_()  # (G, H, S): column s embeds cell s
        self.actor_w = torch.stack([p[1] for p in init]).requires_grad_()  # (G, A, H) like nn.Linear.weight
        self.actor_b = torch.stack([p[2] for p in init]).requires_grad_()  # (G, A)
        self.critic_w = torch.stack([p[3] for p in init]).requires_grad_()  # (G, H)
        self.critic_b = torch.stack([p[4] for p in init]).requires_grad_()  # (G,)
        self.params = [self.embed, self.actor_w, self.actor_b, self.critic_w, self.critic_b]
        self.optimizer = torch.optim.Adam(self.params, lr=cfg.lr, betas=tuple(cfg.adam_betas), eps=cfg.adam_eps,
                                          fused=True)  # elementwise, so batched == per-goal Adam

        self.env = DarkRoomVectorEnv(self.goals, cfg.num_envs, cfg.size, cfg.episode_length,
                                     cfg.random_start, cfg.terminate_on_goal)
        self.obs, _ = self.env.reset(seed=env_seeds(seed, cfg.size, self.goals, self.N))  # (E,)
        self.goal_of_env = np.repeat(np.arange(G), self.N)  # (E,)
        self.updates = 0
        self._uniforms: torch.Tensor | None = None  # (B, T, G, N) block of action noise

    @staticmethod
    def _init_one(gen: torch.Generator, S: int, H: int, A: int, bound: float) -> list[torch.Tensor]:
        """One agent's initial (embed, actor_w, actor_b, critic_w, critic_b)."""
        def uniform(*shape):
            return (torch.rand(*shape, generator=gen) * 2 - 1) * bound
        return [torch.randn(H, S, generator=gen), uniform(A, H), uniform(A), uniform(H), uniform(())]

    # ------------------------------------------------------------------ policy table
    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-policy ``(G, S, A)`` and value ``(G, S)`` for every goal and cell (differentiable)."""
        h = F.relu(self.embed)  # (G, H, S) hidden features of every cell
        heads = torch.cat([self.actor_w, self.critic_w[:, None, :]], dim=1)  # (G, A+1, H)
        # (A+1, H) @ (H, S) per goal: feature-major layout is much faster on CPU for these thin shapes
        out = torch.bmm(heads, h).transpose(1, 2)  # (G, A+1, S) -> (G, S, A+1)
        logits = out[..., :-1] + self.actor_b[:, None, :]  # (G, S, A)
        values = out[..., -1] + self.critic_b[:, None]  # (G, S)
        return F.log_softmax(logits, dim=-1), values

    def _noise(self) -> torch.Tensor:
        """This update's uniforms ``(T, G, N)``, drawn per goal a block of updates at a time."""
        k = self.updates % _RNG_BLOCK
        if k == 0 or self._uniforms is None:
            blocks = [torch.rand(_RNG_BLOCK, self.T, self.N, generator=gen) for gen in self.gens]  # G x (B, T, N)
            self._uniforms = torch.stack(blocks, dim=2)  # (B, T, G, N)
        return self._uniforms[k]

    # ------------------------------------------------------------------ one update
    def step(self) -> tuple[Rollout, dict[str, torch.Tensor]]:
        """Collect ``num_steps`` steps in every env with the current policies, then one optimiser step.

        Returns the rollout (for the history store) and per-goal stats ``(G,)`` tensors.
        """
        cfg, G, S, N, T = self.cfg, self.G, self.S, self.N, self.T
        E = G * N
        log_pi, values = self.tables()  # (G, S, A), (G, S)
        with torch.no_grad():
            cdf = log_pi.exp().cumsum(-1).reshape(G * S, -1)  # (G*S, A)
            flat_values = values.reshape(G * S).numpy()  # (G*S,)
            flat_logp = log_pi.reshape(G * S, -1).numpy()  # (G*S, A)
        cdf_np = cdf.numpy()
        noise = self._noise().reshape(T, E).numpy()  # (T, E)
        row0 = self.goal_of_env * S  # (E,) offset of each env's goal in the flat tables

        r = Rollout(self.updates, *(np.empty((T, E), dt) for dt in (
            np.int64, np.int64, np.float32, bool, bool, np.float32, np.float32, np.int64, np.int64)))
        next_cell = np.empty((T, E), np.int64)  # cell whose value bootstraps step t (final obs if done)
        for t in range(T):
            rows = row0 + self.obs  # (E,)
            action = (noise[t][:, None] >= cdf_np[rows]).sum(-1)  # (E,) inverse-CDF sample
            np.minimum(action, self.A - 1, out=action)  # guard against cdf[-1] < 1 by rounding
            r.state[t], r.action[t] = self.obs, action
            r.logprob[t] = flat_logp[rows, action]
            r.value[t] = flat_values[rows]
            r.episode[t], r.step[t] = self.env.episode, self.env.elapsed
            self.obs, r.reward[t], r.terminated[t], r.truncated[t], info = self.env.step(action)
            next_cell[t] = info["final_obs"] if "final_obs" in info else self.obs

        # Advantages: GAE(lambda) on time-major (T, E); lambda = 1 gives plain n-step returns.
        next_value = flat_values[row0[None, :] + next_cell] * ~r.terminated  # (T, E) 0 after termination
        delta = r.reward + cfg.gamma * next_value - r.value  # (T, E)
        keep = cfg.gamma * cfg.gae_lambda * ~(r.terminated | r.truncated)  # (T, E) cut at episode ends
        adv = np.empty((T, E), np.float32)
        running = np.zeros(E, np.float32)
        for t in reversed(range(T)):
            running = delta[t] + keep[t] * running
            adv[t] = running
        returns = adv + r.value  # (T, E)

        # Loss: each goal's mean over its own T*N transitions (summing goals keeps their gradients apart).
        # Every term depends on a transition only through its table entry, so the rollout is first
        # reduced to per-entry sums (bincount) and the loss is taken over the (G, S, A) table.
        cell = row0[None, :] + r.state  # (T, E) row of each transition in the flat (G*S, ...) tables
        adv_sum = np.bincount((cell * self.A + r.action).ravel(), weights=adv.ravel(), minlength=G * S * self.A)
        visits = np.bincount(cell.ravel(), minlength=G * S)  # (G*S,)
        ret_sum = np.bincount(cell.ravel(), weights=returns.ravel(), minlength=G * S)  # (G*S,)
        ret_sq = (returns.astype(np.float64) ** 2).reshape(T, G, N).sum((0, 2))  # (G,)
        adv_sum = torch.from_numpy(adv_sum.astype(np.float32)).view(G, S, self.A)  # (G, S, A)
        visits = torch.from_numpy(visits.astype(np.float32)).view(G, S)  # (G, S)
        ret_sum = torch.from_numpy(ret_sum.astype(np.float32)).view(G, S)  # (G, S)

        n = T * N
        entropy_table = -(log_pi.exp() * log_pi).sum(-1)  # (G, S)
        policy_loss = -(adv_sum * log_pi).sum((1, 2)) / n  # (G,) mean of -A * log pi(a|s)
        entropy_mean = (visits * entropy_table).sum(1) / n  # (G,)
        value_loss = ((visits * values - 2 * ret_sum) * values).sum(1) / n \
            + torch.from_numpy(ret_sq.astype(np.float32)) / n  # (G,) mean of (R - V(s))^2
        loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy_mean  # (G,)

        self.optimizer.zero_grad(set_to_none=False)
        loss.sum().backward()
        grad_norm = self._clip_per_goal(cfg.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        stats = {"loss": loss.detach(), "policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(),
                 "entropy": entropy_mean.detach(), "grad_norm": grad_norm}
        return r, stats

    def _clip_per_goal(self, max_norm: float) -> torch.Tensor:
        """Scale each goal's gradients like ``clip_grad_norm_`` on that goal's parameters alone; returns (G,) norms."""
        sq = sum(p.grad.pow(2).reshape(self.G, -1).sum(1) for p in self.params)  # (G,)
        norm = sq.sqrt()  # (G,)
        coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)  # (G,)
        for p in self.params:
            p.grad.mul_(coef.view(-1, *([1] * (p.dim() - 1))))
        return norm

    # ------------------------------------------------------------------ after training
    def greedy_actions(self) -> np.ndarray:
        """The greedy action of every goal's policy in every cell, ``(G, S)``."""
        with torch.no_grad():
            log_pi, _ = self.tables()
        return log_pi.argmax(-1).numpy()
