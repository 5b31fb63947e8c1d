"""Acting with a trained AD transformer, in context, in B environments that advance in lockstep.

Window policy (shared by every code path through :class:`ContextWindow`): the context holds at most
``config.context`` transitions, the newest one only partly known (its state; its action is being chosen). When a
new state arrives and the window is full, the newest ``context // 2`` complete transitions are kept and re-encoded
from scratch (the first token then uses the START ids, as a training window starting there does), then the new
state is appended. Between two shifts a step appends one token (transition layout) or three (separate layout) to
the one KV cache of all B envs (``benchmarks/helpers/references.py`` holds the slow full-forward reference).
"""
from __future__ import annotations

import torch

from models.rl.model import ADTransformer
from models.sampling import SAMPLING_RULES, EpisodeDraws, check_temperature, choose, choose_at_draws, draw_bands


class ContextWindow:
    """The raw transitions of the current context window of B lockstep envs."""

    def __init__(self, model: ADTransformer, num_envs: int, device=None):
        cfg = model.config
        self.context = cfg.context
        self.keep = cfg.context // 2
        state_shape = (num_envs, cfg.context) if cfg.num_states else (num_envs, cfg.context, cfg.state_dim)
        state_dtype = torch.long if cfg.num_states else torch.float32
        self.states = torch.zeros(state_shape, dtype=state_dtype, device=device)  # (B, K) or (B, K, D)
        if cfg.action_dim:  # Box actions
            self.actions = torch.zeros(num_envs, cfg.context, cfg.action_dim, device=device)  # (B, K, A)
        else:
            self.actions = torch.zeros(num_envs, cfg.context, dtype=torch.long, device=device)  # (B, K)
        self.rewards = torch.zeros(num_envs, cfg.context, dtype=torch.float32, device=device)  # (B, K)
        self.timesteps = torch.zeros(num_envs, cfg.context, dtype=torch.long, device=device)  # (B, K)
        self.n = 0  # transitions in the window (the last one partial)

    def push(self, obs, prev_action, prev_reward, timestep, first) -> bool:
        """Add the new state; returns True when the window was (re)started and must be encoded from scratch."""
        first = torch.as_tensor(first, dtype=torch.bool)
        if bool(first.any()):
            if not bool(first.all()):
                raise ValueError("`first` must be True for all envs at once (they advance in lockstep)")
            self.n = 0
        restart = self.n == 0
        if self.n > 0:  # complete the previous transition
            self.actions[:, self.n - 1] = prev_action
            self.rewards[:, self.n - 1] = prev_reward
        if self.n == self.context:  # full: keep the most recent `keep` transitions
            lo = self.n - self.keep
            for buf in (self.states, self.actions, self.rewards, self.timesteps):
                buf[:, : self.keep] = buf[:, lo : self.n].clone()
            self.n = self.keep
            restart = True
        self.states[:, self.n] = obs
        self.timesteps[:, self.n] = timestep
        self.actions[:, self.n] = 0  # unknown yet (never read by the tokens that are used)
        self.rewards[:, self.n] = 0.0
        self.n += 1
        return restart

    def view(self, start: int = 0) -> tuple[torch.Tensor, ...]:
        """(states, actions, rewards, timesteps) of transitions start .. n-1 of the window."""
        return (self.states[:, start : self.n], self.actions[:, start : self.n],
                self.rewards[:, start : self.n], self.timesteps[:, start : self.n])


class ADPolicy:
    """Acts with one KV cache shared by B envs (see the module docstring for the window policy).

    ``policy.reset(num_envs)``, then each step ``actions = policy.act(obs, prev_action, prev_reward, timestep,
    first)`` (``first`` True only at the very first step); ``policy.logits(...)`` returns the action logits (B, A).
    Box actions (``action_dim`` > 0): ``prev_action`` and the actions are (B, A) floats in the env's scale; ``greedy``
    takes the head's most likely action, else one is sampled (:meth:`models.rl.box_actions.BoxActions.choose`).
    ``temperature`` T (sampling only): discrete actions are drawn from ``softmax(logits / T)``, so T < 1 moves the
    policy toward its greedy action and T = 1 is the model's own distribution.
    ``sampling`` (sampling only): ``step`` draws every action afresh; ``episode`` keeps one uniform draw per env and
    episode (:class:`models.sampling.EpisodeDraws`) and picks each action by it (:func:`models.sampling.
    choose_at_draws`, discrete actions listed in ``action_order``; Box actions one draw per dimension), so that where
    the model's probabilities mix hypotheses (DPT's optimal action under each place the goal may be) the whole
    episode follows one of them: posterior sampling.
    """

    def __init__(self, model: ADTransformer, greedy: bool = True, generator: torch.Generator | None = None,
                 temperature: float = 1.0, sampling: str = "step", action_order=None):
        self.model = model
        self.greedy = greedy
        self.generator = generator
        self.temperature = check_temperature(temperature)
        if sampling not in SAMPLING_RULES:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLING_RULES)}, got {sampling!r}")
        self.sampling = sampling
        self.action_order = None if action_order is None else torch.as_tensor(action_order, dtype=torch.long)
        if self.action_order is not None and sorted(self.action_order.tolist()) != list(range(model.config.num_actions
                                                                                               or 0)):
            raise ValueError(f"action_order must list each of the model's {model.config.num_actions} actions once, "
                             f"got {self.action_order.tolist()}")
        self.episode_draws: EpisodeDraws | None = None
        self.window: ContextWindow | None = None
        self.cache = None
        #: (B,) log-probability of the discrete actions of the last :meth:`act` (None for Box actions)
        self.last_logprob: torch.Tensor | None = None

    def reset(self, num_envs: int) -> None:
        """Start fresh for ``num_envs`` envs (empties the context)."""
        self.model.eval()
        device = next(self.model.parameters()).device
        dtype = next(self.model.parameters()).dtype
        self.window = ContextWindow(self.model, num_envs, device=device)
        self.cache = self.model.new_cache(num_envs, device=device, dtype=dtype)
        if self.sampling == "episode":
            dims = (self.model.config.action_dim,) if self.model.continuous_actions else ()
            self.episode_draws = EpisodeDraws(self.generator, dims)

    def _check(self, timestep) -> None:
        if self.window is None:
            raise RuntimeError("call reset(num_envs) before acting")
        t = torch.as_tensor(timestep)
        longest = self.model.config.episode_length if self.model.config.time_embedding else None
        if bool((t < 0).any()) or (longest is not None and bool((t >= longest).any())):
            raise ValueError(f"timestep must be in [0, {self.model.config.episode_length}) "
                             f"(the model's episode_length), got {t.tolist()}")

    @torch.no_grad()
    def logits(self, obs, prev_action, prev_reward, timestep, first) -> torch.Tensor:
        """Action logits (B, A) for the new states ``obs`` (B,) [or (B, D)]."""
        self._check(timestep)
        model, window = self.model, self.window
        if window.push(obs, prev_action, prev_reward, timestep, first):
            self.cache.reset()
            x = model.tokens(*window.view())[:, : model.num_tokens(window.n)]  # (B, L, C)
        else:  # tokens added by the new state, from the last two transitions' tokens
            x = model.tokens(*window.view(window.n - 2), start=window.n - 2)
            x = x[:, model.num_tokens(1) : model.num_tokens(2)]  # (B, 1|3, C): the new transition's tokens
        h = model.transformer(x, self.cache)[:, -1]  # (B, C)
        return model.action_head(h)

    def act(self, obs, prev_action, prev_reward, timestep, first) -> torch.Tensor:
        """Actions (B,) [Box: (B, A)] for the new states: argmax if greedy, else sampled."""
        logits = self.logits(obs, prev_action, prev_reward, timestep, first)
        draws = None if self.greedy or self.episode_draws is None else self.episode_draws.at(timestep)  # (B[, A])
        if self.model.continuous_actions:
            self.last_logprob = None
            return self.model.box.choose(logits, self.greedy, self.generator, self.temperature, draws)
        if draws is not None:  # (B,): the episode's draw picks the action; its log-probability is given the
            # episode's earlier actions (they narrow the draws that could have made them), so a path's sum is exact
            actions = choose_at_draws(logits.float(), draws, self.temperature, self.action_order)
            lower, upper = draw_bands(logits.float(), actions, self.temperature, self.action_order)
            self.last_logprob = self.episode_draws.narrow(lower, upper)
            return actions
        actions = choose(logits.float(), self.greedy, self.generator, self.temperature)  # (B,)
        if self.greedy:  # a deterministic choice: probability 1
            self.last_logprob = torch.zeros(actions.shape)
        else:  # (B,) log-probability of each action under the step's distribution
            logp = torch.log_softmax(logits.float() / self.temperature, -1)  # (B, A)
            self.last_logprob = logp.gather(-1, actions[:, None])[:, 0]
        return actions
