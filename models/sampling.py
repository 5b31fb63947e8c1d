"""Choosing actions from a policy's scores: greedy, or sampled at a temperature, afresh at every step or by one draw
per episode (shared by every model family)."""
from __future__ import annotations

import math

import torch


def check_temperature(temperature: float) -> float:
    """``temperature`` as a float; a ValueError unless it is finite and positive."""
    value = float(temperature)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"temperature must be finite and > 0 (greedy acting is its limit), got {temperature!r}")
    return value


def choose(logits: torch.Tensor, greedy: bool, generator: torch.Generator | None,
           temperature: float = 1.0) -> torch.Tensor:
    """Indices (...,) from unnormalised log-probabilities (..., A) (``-inf``: never chosen): the argmax if
    ``greedy``, else a draw from ``softmax(logits / temperature)``, in the logits' dtype.

    A temperature below 1 sharpens the distribution toward the argmax (its limit as T -> 0), above 1 flattens it.
    """
    if greedy:
        return logits.argmax(-1)
    probs = torch.softmax(logits / temperature, -1)  # (..., A)
    return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).view(probs.shape[:-1])


def choose_at_draws(logits: torch.Tensor, draws: torch.Tensor, temperature: float = 1.0,
                    order: torch.Tensor | None = None) -> torch.Tensor:
    """Indices (...,) from unnormalised log-probabilities (..., A), each picked by its uniform ``draws`` (...,) in
    [0, 1): the first action, in ``order`` (a permutation of the A indices; default 0 .. A-1), at which the
    cumulative probability of ``softmax(logits / temperature)`` passes the draw (the inverse of the distribution's
    CDF). A uniform draw gives a sample of the distribution, as :func:`choose` does; keeping one draw for several
    choices makes them agree: where the probabilities mix hypotheses that the order lists one after another (a
    room's goals, row by row), every choice follows the same hypothesis.
    """
    cum, last = ordered_cdf(logits, temperature, order)
    below = (cum <= draws[..., None]).sum(-1)  # (...,): actions whose cumulative mass is passed
    picked = torch.minimum(below, last)  # a draw past the summed mass (its rounding below 1) takes that one
    return picked if order is None else order[picked]


def ordered_cdf(logits: torch.Tensor, temperature: float = 1.0, order: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(cumulative probabilities (..., A) of ``softmax(logits / temperature)`` summed in ``order``, the place in
    the order (...,) of the last action with any mass): what :func:`choose_at_draws` and :func:`draw_bands` read."""
    probs = torch.softmax(logits.float() / temperature, -1)  # (..., A)
    if order is not None:
        probs = probs[..., order]
    return probs.cumsum(-1), probs.shape[-1] - 1 - (probs > 0).flip(-1).int().argmax(-1)


def draw_bands(logits: torch.Tensor, actions: torch.Tensor, temperature: float = 1.0,
               order: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(lower, upper), each (...,): the draws in [0, 1) for which :func:`choose_at_draws` picks ``actions`` (...,)
    from the same logits (..., A), temperature and order, ``lower <= draw < upper``; computed with the chooser's own
    sums, so every draw that picked an action lies in its band (the last action with mass takes the band up to 1).
    """
    cum, last = ordered_cdf(logits, temperature, order)  # (..., A), (...,)
    position = actions if order is None else torch.argsort(order)[actions]  # (...,): each action's place in the order
    upper = torch.where(position == last, torch.ones_like(cum[..., 0]), cum.gather(-1, position[..., None])[..., 0])
    lower = torch.where(position > 0, cum.gather(-1, (position - 1).clamp(min=0)[..., None])[..., 0],
                        torch.zeros_like(upper))
    return lower, upper


#: How sampled actions are drawn (``ad eval --sampling``): a fresh draw at every step, or one per episode.
SAMPLING_RULES = ("step", "episode")


class EpisodeDraws:
    """Uniform draws in [0, 1) kept for a whole episode, one per env (and per action dimension: ``dims``), renewed
    in the envs whose episode starts (time step 0): what :func:`choose_at_draws` picks every action of an episode
    with under ``ad eval --sampling episode``.

    For one draw per env (no ``dims``) it also keeps, per env, the interval of draws that would have picked the
    episode's actions so far (:meth:`narrow`), so that the probability of each action given the episode's earlier
    ones, and hence of the whole path, can be recorded."""

    def __init__(self, generator: torch.Generator | None = None, dims: tuple[int, ...] = ()):
        self.generator = generator
        self.dims = tuple(dims)
        self.draws: torch.Tensor | None = None  # (B, *dims)
        self.low: torch.Tensor | None = None  # (B,) float64: the draws consistent with the episode's actions so far
        self.high: torch.Tensor | None = None  # (B,)

    def at(self, timestep: torch.Tensor) -> torch.Tensor:
        """The draws (B, *dims) of the envs at in-episode ``timestep`` (B,): new ones where it is 0."""
        timestep = torch.as_tensor(timestep)
        fresh = torch.rand((timestep.shape[0], *self.dims), generator=self.generator)  # (B, *dims)
        if self.draws is None or self.draws.shape != fresh.shape:
            self.draws = fresh
            self.low = torch.zeros(fresh.shape[0], dtype=torch.float64)
            self.high = torch.ones(fresh.shape[0], dtype=torch.float64)
        else:
            starts = (timestep == 0).reshape(-1, *([1] * len(self.dims)))  # (B, 1...)
            self.draws = torch.where(starts, fresh, self.draws)
            self.low = torch.where(timestep == 0, 0.0, self.low)
            self.high = torch.where(timestep == 0, 1.0, self.high)
        return self.draws

    def narrow(self, lower: torch.Tensor, upper: torch.Tensor) -> torch.Tensor:
        """Log-probability (B,) of the actions just picked given the episode's earlier actions: the share of the draws
        still consistent with the episode that fall in the actions' bands ``[lower, upper)`` (B,) (from
        :func:`draw_bands`); the kept intervals narrow to those draws. Summed over an episode: the log-probability
        of its whole path of actions."""
        if self.low is None or self.dims:
            raise RuntimeError("narrow needs one draw per env, after at()")
        low = torch.maximum(self.low, lower.double())
        high = torch.minimum(self.high, upper.double())
        logprob = torch.log((high - low) / (self.high - self.low))  # (B,): the draw lies in both, so high > low
        self.low, self.high = low, high
        return logprob.float()
