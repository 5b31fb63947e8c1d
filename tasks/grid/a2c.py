"""Batched A2C: one independent tabular actor-critic per grid task (a DarkRoom goal, a Key-to-Door key/door pair),
all of them trained in one computation.

Agent (the DarkRoom AD recipe): a shared embedding layer (``hidden`` features per cell, then ReLU) feeding linear
actor and critic heads. Every goal has its own parameters, stacked on a leading ``G`` dimension; one Adam step
updates every agent, with gradient clipping per goal, so each agent is exactly what it would be trained alone.
Each update computes the whole policy / value table ``(G, A, S)`` / ``(G, S)`` once (rollout steps gather from
it); the loss uses the rollout only through per-table-entry sums (``np.bincount``), and its gradient is written out
by hand (two ``bmm``'s and a ReLU mask). Random numbers come from one ``torch.Generator`` per goal.

A goal's history is the same bit for bit whatever batch it is trained in and on any number of torch threads: the
per-goal generators, a goal-major memory layout (:func:`_goal_major`), one gemm per goal on one thread
(:func:`_bmm`) and per-goal gradient norms combined elementwise see to it. Training runs with denormal floats
flushed to zero (:func:`denormals_flushed`): Adam's moments of never-visited cells decay into the denormal range,
where x86 arithmetic is many times slower.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from tasks.grid.room import NUM_ACTIONS, GridVectorEnv

#: Updates' worth of uniforms drawn per goal generator call (keeps the per-goal loop off the hot path).
_RNG_BLOCK = 256
#: Goal blocks of batched tensors start at multiples of this many floats (64 bytes; see _goal_major).
_ALIGN = 16


def _goal_major(G: int, shape: tuple[int, ...], zero: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """A ``(G, *shape)`` float32 tensor in goal-major layout: (that view, the ``(G, block)`` tensor under it),
    zero-filled (padding included) if ``zero``, else uninitialised (for results that are written whole).

    Goal g's block starts at float ``g * block``, ``block`` being the next multiple of ``_ALIGN`` above ``prod(shape)``,
    which keeps a goal's arithmetic independent of its batch: every block is 64-byte aligned (MKL's gemm rounds by
    alignment) and a whole number of SIMD vectors (fused Adam's scalar tail rounds differently), and the view is never
    contiguous, so :func:`_bmm` into it computes one gemm per goal, not MKL's batched gemm (whose rounding depends on
    the batch).
    """
    n = math.prod(shape)
    block = (n // _ALIGN + 1) * _ALIGN
    rows = torch.zeros(G, block) if zero else torch.empty(G, block)
    view = rows[:, :n].view(G, *shape)
    return view, rows


def _goal_major_param(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` ``(G, ...)`` copied into a :func:`_goal_major` tensor with a zero ``.grad`` of the same layout: (the view,
    whose ``.grad`` is the matching view, the ``(G, block)`` tensor for the optimiser); the padding's zero gradients
    keep it at zero under Adam and out of gradient norms."""
    view, rows = _goal_major(x.shape[0], tuple(x.shape[1:]))
    view.copy_(x)
    rows.grad = torch.zeros_like(rows)
    view.grad = rows.grad[:, :view[0].numel()].view(view.shape)  # written in place by the hand-made backward pass
    return view, rows


def _bmm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """``torch.bmm(a, b)`` into the :func:`_goal_major` tensor ``out``, on one thread whatever torch's thread count:
    one matrix product per goal, each the same computation whatever the batch (MKL's split of a product over threads
    may change its rounding)."""
    threads = torch.get_num_threads()
    if threads > 1:
        torch.set_num_threads(1)
    try:
        if len(out) == 1:  # a one-goal view counts as contiguous: run it as a batch of two, as any batch runs
            pair, _ = _goal_major(2, tuple(out.shape[1:]), zero=False)
            torch.bmm(a.expand(2, -1, -1), b.expand(2, -1, -1), out=pair)
            out.copy_(pair[:1])
        else:
            assert not out.is_contiguous(), "a goal-major out (see _goal_major) keeps bmm to one gemm per goal"
            torch.bmm(a, b, out=out)
    finally:
        if threads > 1:
            torch.set_num_threads(threads)


@contextlib.contextmanager
def denormals_flushed() -> Iterator[None]:
    """Flush denormal floats (below ~1.2e-38) to zero on this thread, where the CPU supports it, inside the block."""
    flushed = torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if flushed:
            torch.set_flush_denormal(False)


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


def goal_seed(seed: int, size: int, goal: tuple[int, ...]) -> int:
    """The seed of one goal's agent: a function of the run seed and the goal (any tuple of ints: a DarkRoom
    goal cell, a Key-to-Door key + door) only."""
    return int(np.random.SeedSequence([int(seed), int(size), *(int(x) for x in goal)]).generate_state(1)[0])


def env_seeds(seed: int, size: int, goals: list[tuple[int, ...]], envs_per_goal: int) -> list[int]:
    """Seeds of the sub-envs (goal-major), a function of the run seed and each sub-env's goal only."""
    return [goal_seed(seed, size, g) + i for g in goals for i in range(envs_per_goal)]


@dataclass
class TableLoss:
    """Each goal's A2C loss, the mean over its ``n`` transitions of ``-A * log pi(a|s) + vf_coef * (R - V(s))^2 -
    ent_coef * H(pi(.|s))``, written through per-table-entry sums of one rollout (every term depends on a transition
    only through its table entry)."""

    log_pi: torch.Tensor  # (G, A, S) log-policy table
    values: torch.Tensor  # (G, S) value table
    adv_sum: torch.Tensor  # (G, A, S) advantages summed per state and action
    visits: torch.Tensor  # (G, S) visit counts per state
    ret_sum: torch.Tensor  # (G, S) returns summed per state
    ret_sq: torch.Tensor  # (G,) squared returns summed
    n: int  # transitions per goal
    vf_coef: float
    ent_coef: float

    def grads(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradients of the summed losses with respect to the logits ``(G, A, S)`` and the values ``(G, S)``."""
        n, p = self.n, self.log_pi.exp()  # p: (G, A, S)
        entropy = -(p * self.log_pi).sum(1)  # (G, S)
        # log_softmax: d(sum_a c_a log p_a)/dz = c - p * sum_a c_a;  d H / dz = -p * (log p + H)
        d_logits = (p * self.adv_sum.sum(1, keepdim=True) - self.adv_sum) / n \
            + (self.ent_coef / n) * self.visits[:, None] * p * (self.log_pi + entropy[:, None])  # (G, A, S)
        d_values = (2 * self.vf_coef / n) * (self.visits * self.values - self.ret_sum)  # (G, S)
        return d_logits, d_values

    def stats(self) -> dict[str, torch.Tensor]:
        """Per-goal ``(G,)`` loss and its parts (policy_loss, value_loss, entropy)."""
        n, log_pi, values = self.n, self.log_pi, self.values
        entropy = -(log_pi.exp() * log_pi).sum(1)  # (G, S)
        policy_loss = -(self.adv_sum * log_pi).sum((1, 2)) / n  # (G,) mean of -A * log pi(a|s)
        entropy_mean = (self.visits * entropy).sum(1) / n  # (G,)
        value_loss = (((self.visits * values - 2 * self.ret_sum) * values).sum(1) + self.ret_sq) / n  # (G,)
        loss = policy_loss + self.vf_coef * value_loss - self.ent_coef * entropy_mean  # (G,)
        return {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy_mean}


class BatchedA2C:
    """A2C agents for ``goals`` (one per goal), trained together on the family's grid vector env.

    ``cfg`` holds the A2C options of :class:`tasks.grid.family.GridOptions` and the env options; ``goals`` are the
    tasks (tuples of ints); agent ``g``'s initial weights and action noise depend on (``seed``, goals[g]) only.
    ``family`` (:class:`tasks.grid.family.GridFamily`) gives ``num_states(cfg)`` (the agent's tabular states, which
    may be more than the observed cells) and ``make_env(cfg, goals)`` (a goal-major
    :class:`~tasks.grid.room.GridVectorEnv` whose observations index those states).
    """

    def __init__(self, cfg, goals: list[tuple[int, ...]], seed: int, family):
        self.cfg = cfg
        self.goals = [tuple(int(x) for x in g) for g in goals]
        G, S, H, A = len(goals), family.num_states(cfg), cfg.hidden, NUM_ACTIONS
        self.G, self.S, self.A, self.N, self.T = G, S, A, cfg.num_envs, cfg.num_steps
        self.gens = [torch.Generator().manual_seed(goal_seed(seed, cfg.size, g)) for g in self.goals]

        # Per-goal parameters, initialised like nn.Embedding / nn.Linear, each from its goal's generator.
        bound = 1.0 / math.sqrt(H)
        init = [self._init_one(gen, S, H, A, bound) for gen in self.gens]
        # Goal-major parameters (see _goal_major); self.params are (G, ...) views of the optimiser's (G, block) rows.
        self.embed, embed_rows = _goal_major_param(torch.stack([p[0] for p in init]))  # (G, H, S): column s embeds s
        # actor rows 0..A-1 (like nn.Linear.weight), critic row A: one bmm computes both heads
        self.heads, heads_rows = _goal_major_param(torch.stack([torch.cat([p[1], p[3][None]]) for p in init]))
        self.bias, bias_rows = _goal_major_param(torch.stack([torch.cat([p[2], p[4][None]]) for p in init]))
        self.params = [self.embed, self.heads, self.bias]  # (G, H, S), (G, A+1, H), (G, A+1)
        self._rows = [embed_rows, heads_rows, bias_rows]  # (G, block) each, padding 0
        self._d_hidden, _ = _goal_major(G, (H, S), zero=False)  # (G, H, S) gradient before the ReLU mask
        # elementwise, so batched == per-goal Adam (the padded rows keep every element on its vector path)
        self.optimizer = torch.optim.Adam(self._rows, lr=cfg.learning_rate, betas=tuple(cfg.adam_betas),
                                          eps=cfg.adam_eps, fused=True)

        self.env: GridVectorEnv = family.make_env(cfg, self.goals)
        self.obs, _ = self.env.reset(seed=env_seeds(seed, cfg.size, self.goals, self.N))  # (E,)
        self.goal_of_env = np.repeat(np.arange(G), self.N)  # (E,)
        self.row0 = self.goal_of_env * S  # (E,) offset of each env's goal in flat (G*S,) tables
        self.updates = 0
        self._uniforms: torch.Tensor | None = None  # (B, T, G, N) block of action noise

    @staticmethod
    def _init_one(gen: torch.Generator, S: int, H: int, A: int, bound: float) -> list[torch.Tensor]:
        """One agent's initial (embed, actor_w, actor_b, critic_w, critic_b)."""
        def uniform(*shape):
            return (torch.rand(*shape, generator=gen) * 2 - 1) * bound
        return [torch.randn(H, S, generator=gen), uniform(A, H), uniform(A), uniform(H), uniform(())]

    # ------------------------------------------------------------------ policy table
    def _forward(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Hidden features ``(G, H, S)``, log-policy ``(G, A, S)`` and values ``(G, S)`` of every goal and cell."""
        G, H, S = self.G, self.cfg.hidden, self.S
        h, _ = _goal_major(G, (H, S), zero=False)  # bmm operands and results are goal-major (see _goal_major)
        torch.clamp_min(self.embed, 0.0, out=h)  # (G, H, S) hidden features of every cell: ReLU
        # (A+1, H) @ (H, S) per goal: feature-major layout is much faster on CPU for these thin shapes
        out, _ = _goal_major(G, (self.A + 1, S), zero=False)
        _bmm(self.heads, h, out=out)
        out.add_(self.bias[:, :, None])  # (G, A+1, S)
        return h, torch.log_softmax(out[:, :self.A], dim=1), out[:, self.A]

    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-policy ``(G, S, A)`` and value ``(G, S)`` for every goal and cell."""
        _, log_pi, values = self._forward()
        return log_pi.transpose(1, 2), values

    def _noise(self) -> torch.Tensor:
        """This update's uniforms ``(T, G, N)``, drawn per goal a block of updates at a time."""
        k = self.updates % _RNG_BLOCK
        if k == 0 or self._uniforms is None:
            blocks = [torch.rand(_RNG_BLOCK, self.T, self.N, generator=gen) for gen in self.gens]  # G x (B, T, N)
            self._uniforms = torch.stack(blocks, dim=2)  # (B, T, G, N)
        return self._uniforms[k]

    # ------------------------------------------------------------------ one update
    def step(self, stats: bool = True) -> tuple[Rollout, dict[str, torch.Tensor]]:
        """Collect ``num_steps`` steps in every env with the current policies, then one optimiser step; returns the
        rollout and per-goal stats ``(G,)`` tensors (loss, its parts and the gradient norm before clipping; none with
        ``stats=False``)."""
        cfg, G, S, A, N, T = self.cfg, self.G, self.S, self.A, self.N, self.T
        h, log_pi, values = self._forward()  # (G, H, S), (G, A, S), (G, S)
        flat_values = values.reshape(G * S).numpy()  # (G*S,)
        r, next_cell = self._rollout(log_pi, flat_values)
        adv, returns = self._advantages(r, flat_values, next_cell)  # (T, E), (T, E)

        # Every loss term depends on a transition only through its table entry, so the rollout is
        # reduced to per-entry sums (bincount) and the loss is taken over the tables.
        cell = self.row0 + r.state  # (T, E) row of each transition in the flat (G*S,) tables
        entry = (self.goal_of_env * A + r.action) * S + r.state  # (T, E) index into flat (G*A*S,) tables
        adv_sum = np.bincount(entry.ravel(), weights=adv.ravel(), minlength=G * A * S)  # (G*A*S,)
        visits = np.bincount(cell.ravel(), minlength=G * S)  # (G*S,)
        ret_sum = np.bincount(cell.ravel(), weights=returns.ravel(), minlength=G * S)  # (G*S,)
        ret_sq = (returns.astype(np.float64) ** 2).reshape(T, G, N).sum((0, 2))  # (G,)
        loss = TableLoss(log_pi, values, torch.from_numpy(adv_sum.astype(np.float32)).view(G, A, S),
                         torch.from_numpy(visits.astype(np.float32)).view(G, S),
                         torch.from_numpy(ret_sum.astype(np.float32)).view(G, S),
                         torch.from_numpy(ret_sq.astype(np.float32)), T * N, cfg.vf_coef, cfg.ent_coef)

        self._backward(h, *loss.grads())
        grad_norm = self._clip_per_goal(cfg.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        return r, ({**loss.stats(), "grad_norm": grad_norm} if stats else {})

    def _rollout(self, log_pi: torch.Tensor, flat_values: np.ndarray) -> tuple[Rollout, np.ndarray]:
        """``num_steps`` steps of every env under the policy tables ``log_pi`` ``(G, A, S)``; returns the rollout and
        the bootstrap cells ``(T, E)`` whose values follow each step (the next observation, or an episode's last)."""
        G, S, A, T, E = self.G, self.S, self.A, self.T, self.G * self.N
        # inverse-CDF sampling: the action is the number of cumulative probabilities <= u; the last is
        # ~1 (the count over the first A-1 is already < A, which also guards against cdf[-1] < 1)
        cdf = log_pi[:, :A - 1].exp().cumsum(1).transpose(0, 1).reshape(A - 1, G * S).numpy()  # (A-1, G*S)
        noise = self._noise().reshape(T, E).numpy()  # (T, E)
        r = Rollout(self.updates, *(np.empty((T, E), dt) for dt in (
            np.int64, np.int64, np.float32, bool, bool, np.float32, np.float32, np.int64, np.int64)))
        next_cell = np.empty((T, E), np.int64)
        env, obs = self.env, self.obs
        for t in range(T):
            r.state[t], r.episode[t], r.step[t] = obs, env.episode, env.elapsed
            np.sum(noise[t] >= cdf.take(self.row0 + obs, axis=1), axis=0, out=r.action[t])  # (E,)
            obs, r.reward[t], r.terminated[t], r.truncated[t], info = env.step(r.action[t])
            next_cell[t] = info.get("final_obs", obs)
        self.obs = obs
        flat_logp = log_pi.reshape(G * A * S).numpy()  # (G*A*S,)
        r.logprob[:] = flat_logp[(self.goal_of_env * A + r.action) * S + r.state]
        r.value[:] = flat_values[self.row0 + r.state]
        return r, next_cell

    def _advantages(self, r: Rollout, flat_values: np.ndarray, next_cell: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """GAE(lambda) advantages and returns ``(T, E)``; lambda = 1 gives plain n-step returns."""
        cfg, T, E = self.cfg, self.T, self.G * self.N
        next_value = flat_values[self.row0 + next_cell] * ~r.terminated  # (T, E) 0 after termination
        delta = r.reward + cfg.gamma * next_value - r.value  # (T, E)
        keep = cfg.gamma * cfg.gae_lambda * ~(r.terminated | r.truncated)  # (T, E) cut at episode ends
        adv = np.empty((T, E), np.float32)
        running = np.zeros(E, np.float32)
        for t in reversed(range(T)):
            running = delta[t] + keep[t] * running
            adv[t] = running
        return adv, adv + r.value

    def _backward(self, h: torch.Tensor, d_logits: torch.Tensor, d_values: torch.Tensor) -> None:
        """Parameter gradients (into each ``p.grad``) from the table gradients ``(G, A, S)`` / ``(G, S)``; ``h`` is the
        ``(G, H, S)`` ReLU output of the forward pass."""
        d_out, _ = _goal_major(self.G, (self.A + 1, self.S), zero=False)  # (G, A+1, S) goal-major, a bmm operand
        d_out[:, :self.A] = d_logits
        d_out[:, self.A] = d_values
        torch.sum(d_out, dim=2, out=self.bias.grad)  # (G, A+1)
        _bmm(d_out, h.transpose(1, 2), out=self.heads.grad)  # (G, A+1, H)
        _bmm(self.heads.transpose(1, 2), d_out, out=self._d_hidden)  # (G, H, S)
        # the ReLU's backward (what autograd runs for torch.relu): zero where the output is 0
        torch.ops.aten.threshold_backward.grad_input(self._d_hidden, h, 0.0, grad_input=self.embed.grad)

    def _clip_per_goal(self, max_norm: float) -> torch.Tensor:
        """Scale each goal's gradients like ``clip_grad_norm_`` on that goal's parameters alone; returns (G,) norms."""
        # Row norms (one row per goal: the same kernel whatever G), combined elementwise: a vector_norm over the
        # (P, G) stack takes another reduction kernel for G == 1 (contiguous) than for G > 1 (strided), which
        # rounds differently (seen: 1 ulp, enough to change a clipped update).
        norm_sq = None
        for rows in self._rows:  # (G, block): the padding's zero gradients add nothing
            n = torch.linalg.vector_norm(rows.grad, dim=1)  # (G,)
            norm_sq = n * n if norm_sq is None else norm_sq + n * n
        norm = norm_sq.sqrt()  # (G,)
        coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)  # (G,)
        for rows in self._rows:
            rows.grad.mul_(coef[:, None])
        return norm

    # ------------------------------------------------------------------ after training
    def greedy_actions(self) -> np.ndarray:
        """The greedy action of every goal's policy in every cell, ``(G, S)``."""
        log_pi, _ = self.tables()
        return log_pi.argmax(-1).numpy()
