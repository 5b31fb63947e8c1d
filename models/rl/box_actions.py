"""Box (continuous) actions of the AD transformer: rescaling, the two action heads, their loss and their choice.

Every Box action ``a`` (B, T, D) in the env's scale is rescaled from the bounds ``[low, high]`` to ``[-1, 1]``
(:meth:`BoxActions.scale`); the previous action is embedded from that vector by a linear projection. The action
head (``ADConfig.action_head``) reads one hidden state (B, T, C) and outputs ``params``:

* ``gaussian``: (B, T, 2D) = a mean and a log-std per dimension of a Gaussian over the pre-squash value ``u``;
  the action is ``low + (tanh(u) + 1) / 2 * (high - low)``. Trained by the log-likelihood of the recorded action
  (with the tanh and rescaling corrections, so :meth:`BoxActions.log_prob` is the density of the env-scale action).
* ``bins``: (B, T, D * N) = logits of ``N = ADConfig.action_bins`` bins per dimension, bin ``i`` standing for the
  value ``-1 + 2 i / (N - 1)`` in the rescaled action (so both bounds are bins); trained by cross-entropy per
  dimension against the nearest bin of the recorded action.

Acting (:meth:`BoxActions.choose`): ``greedy`` takes the squashed mean ``tanh(mean)`` (Gaussian) or the most likely
bin of each dimension (bins); otherwise an action is sampled from the head's distribution (at a temperature: the
Gaussian's std times T, the bins' logits divided by T), or, given uniform ``draws`` per dimension (``ad eval --sampling
episode``), picked by them: the Gaussian's noise is their normal quantile, each dimension's bin the first whose
cumulative probability passes its draw.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from models.sampling import choose, choose_at_draws

#: Recorded actions on (or beyond) a bound are pulled this far inside [-1, 1] before ``atanh`` (u = +-3.8).
EDGE = 1e-3
#: Range of the Gaussian's log-std (a tanh of the head's output is mapped onto it, so it never saturates hard).
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
HEADS = ("gaussian", "bins")


class BoxActions(nn.Module):
    """The bounds and the head arithmetic of Box actions (no trained parameters: the head's Linear layer lives in
    the model as ``action_head``, its output size is :attr:`head_size`).

    Args:
        low, high: per-dimension bounds (D,), finite, ``low < high``.
        head: ``"gaussian"`` or ``"bins"``.
        bins: bins per dimension (``head == "bins"``).
    """

    def __init__(self, low: list[float], high: list[float], head: str = "gaussian", bins: int = 11) -> None:
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        self.head, self.bins, self.dim = head, int(bins), len(low)
        # not saved in the state dict: they come from the config, so a checkpoint's keys do not depend on them
        self.register_buffer("low", torch.tensor(low, dtype=torch.float32), persistent=False)  # (D,)
        self.register_buffer("high", torch.tensor(high, dtype=torch.float32), persistent=False)  # (D,)

    @property
    def head_size(self) -> int:
        """Outputs of the action head: 2D (mean, log-std) or D x bins (logits)."""
        return 2 * self.dim if self.head == "gaussian" else self.dim * self.bins

    # ------------------------------------------------------------------ scales
    def scale(self, actions: torch.Tensor) -> torch.Tensor:
        """Env-scale actions (..., D) -> [-1, 1] (values outside the bounds are clamped)."""
        x = 2.0 * (actions.to(self.low.dtype) - self.low) / (self.high - self.low) - 1.0
        return x.clamp(-1.0, 1.0)

    def unscale(self, x: torch.Tensor) -> torch.Tensor:
        """[-1, 1] (..., D) -> env-scale actions, inside the bounds."""
        return torch.minimum(torch.maximum(self.low + (x + 1.0) * 0.5 * (self.high - self.low), self.low), self.high)

    def to_bins(self, actions: torch.Tensor) -> torch.Tensor:
        """Env-scale actions (..., D) -> index (..., D) int64 of the nearest bin."""
        return ((self.scale(actions) + 1.0) * 0.5 * (self.bins - 1)).round().long()

    def from_bins(self, index: torch.Tensor) -> torch.Tensor:
        """Bin indices (..., D) -> env-scale actions (..., D) at the bins' values."""
        return self.unscale(index.to(self.low.dtype) * (2.0 / (self.bins - 1)) - 1.0)

    # ------------------------------------------------------------------ Gaussian
    def gaussian(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Head output (..., 2D) -> (mean, log_std) (..., D) of the pre-squash Gaussian."""
        mean, raw = params.float().chunk(2, dim=-1)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(raw) + 1.0)
        return mean, log_std

    def log_prob(self, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Gaussian head: log-density (...,) of env-scale actions (..., D), summed over dimensions.

        ``log N(u; mean, std) - log(1 - tanh(u)^2) - log((high - low) / 2)`` with ``u = atanh(scaled action)``
        (the change of variables of ``tanh`` and of the rescaling).
        """
        mean, log_std = self.gaussian(params)
        x = self.scale(actions).clamp(-1.0 + EDGE, 1.0 - EDGE)
        u = torch.atanh(x)
        normal = -0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
        tanh_jacobian = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))  # log(1 - tanh(u)^2), stably
        return (normal - tanh_jacobian - torch.log((self.high - self.low) * 0.5)).sum(-1)

    # ------------------------------------------------------------------ both heads
    def loss(self, params: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(negative log-likelihood (B, T) of the recorded actions, squared error (B, T) of the greedy action in
        the [-1, 1] scale, mean over dimensions)."""
        target = self.scale(actions)  # (B, T, D)
        if self.head == "gaussian":
            nll = -self.log_prob(params, actions)  # (B, T)
        else:
            logits = params.float().unflatten(-1, (self.dim, self.bins))  # (B, T, D, N)
            ce = F.cross_entropy(logits.flatten(0, -2), self.to_bins(actions).flatten(), reduction="none")
            nll = ce.view(target.shape).sum(-1)  # (B, T)
        greedy = self.scale(self.choose(params.detach(), greedy=True))  # (B, T, D)
        return nll, ((greedy - target) ** 2).mean(-1)

    def choose(self, params: torch.Tensor, greedy: bool, generator: torch.Generator | None = None,
               temperature: float = 1.0, draws: torch.Tensor | None = None) -> torch.Tensor:
        """Env-scale actions (..., D) from head outputs (..., head_size): the squashed mean / most likely bin when
        ``greedy``, else a sample of the head's distribution at ``temperature`` T (Gaussian: its std times T; bins:
        each dimension's logits divided by T), picked by ``draws`` (..., D) uniform in (0, 1) where given."""
        if self.head == "gaussian":
            mean, log_std = self.gaussian(params)
            if not greedy:
                if draws is None:
                    noise = torch.randn(mean.shape, generator=generator)
                else:  # the standard normal quantile of each draw
                    noise = torch.special.ndtri(draws.clamp(1e-6, 1 - 1e-6).to(mean.dtype))
                mean = mean + log_std.exp() * temperature * noise.to(mean.device)
            return self.unscale(torch.tanh(mean))
        logits = params.float().unflatten(-1, (self.dim, self.bins))  # (..., D, N)
        if draws is not None and not greedy:
            return self.from_bins(choose_at_draws(logits, draws.to(logits.device), temperature))
        return self.from_bins(choose(logits, greedy, generator, temperature))
