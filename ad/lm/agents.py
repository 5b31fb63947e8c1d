"""Small protocols shared by LLM tasks (the LLM tasks' "base classes"): actor and critic.

They say only what a training loop needs, so a task's loop works with any implementation (an LM + LoRA actor,
a scripted one in tests, a value head on LM features ...). ``tasks/gridworld`` implements both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@dataclass
class ActorOutput:
    """What an actor proposes for a batch of B prompts."""

    texts: list[str]  #: the completions as text (always valid for the task)
    actions: list[Any]  #: the parsed actions (e.g. a list of move codes per prompt)
    logprobs: list[np.ndarray] = field(default_factory=list)  #: per-token behaviour log-probabilities, one array each


@runtime_checkable
class Actor(Protocol):
    """A policy over text prompts: B prompts in, B valid actions out (batched)."""

    def act(self, prompts: Sequence[str], greedy: bool = False) -> ActorOutput: ...


@runtime_checkable
class Critic(Protocol):
    """A state-value estimate for B prompts (state + info text)."""

    def values(self, prompts: Sequence[str]) -> np.ndarray: ...  # (B,) float
