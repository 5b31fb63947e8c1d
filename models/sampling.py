"""Choosing actions from a policy's scores: greedy, or sampled at a temperature (shared by every model family)."""
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
