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
    probs = torch.softmax(logits.float() / temperature, -1)  # (..., A)
    if order is not None:
        probs = probs[..., order]
    below = (probs.cumsum(-1) <= draws[..., None]).sum(-1)  # (...,): actions whose cumulative mass is passed
    last = probs.shape[-1] - 1 - (probs > 0).flip(-1).int().argmax(-1)  # (...,): the last action with any mass
    picked = torch.minimum(below, last)  # a draw past the summed mass (its rounding below 1) takes that one
    return picked if order is None else order[picked]


#: How sampled actions are drawn (``ad eval --sampling``): a fresh draw at every step, or one per episode.
SAMPLING_RULES = ("step", "episode")


class EpisodeDraws:
    """Uniform draws in [0, 1) kept for a whole episode, one per env (and per action dimension: ``dims``), renewed
    in the envs whose episode starts (time step 0): what :func:`choose_at_draws` picks every action of an episode
    with under ``ad eval --sampling episode``."""

    def __init__(self, generator: torch.Generator | None = None, dims: tuple[int, ...] = ()):
        self.generator = generator
        self.dims = tuple(dims)
        self.draws: torch.Tensor | None = None  # (B, *dims)

    def at(self, timestep: torch.Tensor) -> torch.Tensor:
        """The draws (B, *dims) of the envs at in-episode ``timestep`` (B,): new ones where it is 0."""
        timestep = torch.as_tensor(timestep)
        fresh = torch.rand((timestep.shape[0], *self.dims), generator=self.generator)  # (B, *dims)
        if self.draws is None or self.draws.shape != fresh.shape:
            self.draws = fresh
        else:
            starts = (timestep == 0).reshape(-1, *([1] * len(self.dims)))  # (B, 1...)
            self.draws = torch.where(starts, fresh, self.draws)
        return self.draws
