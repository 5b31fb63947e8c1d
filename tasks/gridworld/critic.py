"""The critic: the LM's last-token hidden state of the prompt (frozen, cached per prompt) -> a small value head,
trained on Monte-Carlo returns of the frozen actor's episodes."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from ad.files import atomic_path
from ad.lm.scoring import left_pad


class LMFeatures:
    """Final-layer hidden state (H,) of each prompt's last token, batched, cached by prompt text. With a peft
    model the adapter is disabled, so features stay those of the frozen base LM whatever the actor learns."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 32):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.cache: dict[str, np.ndarray] = {}

    @torch.no_grad()
    def __call__(self, prompts: Sequence[str]) -> torch.Tensor:
        """(B, H) float32 features."""
        missing = sorted({p for p in prompts if p not in self.cache})
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        device = next(self.model.parameters()).device
        disable = getattr(self.model, "disable_adapter", contextlib.nullcontext)  # a plain model has no adapter
        was_training = self.model.training
        self.model.eval()
        for i in range(0, len(missing), self.batch_size):
            chunk = missing[i:i + self.batch_size]
            ids, mask = left_pad([self.tokenizer(p)["input_ids"] for p in chunk], pad)  # (b, L)
            positions = (mask.cumsum(1) - 1).clamp(min=0)  # (b, L)
            kwargs = dict(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                          output_hidden_states=True)
            with disable():
                out = self.model(**kwargs)
            last = out.hidden_states[-1][:, -1].float().cpu().numpy()  # (b, H) left padding: last = real token
            self.cache.update(zip(chunk, last))
        self.model.train(was_training)
        return torch.as_tensor(np.stack([self.cache[p] for p in prompts]))


class ValueHead(nn.Module):
    """(B, H) features -> (B,) values."""

    def __init__(self, hidden: int, width: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)  # (B,)


class LMCritic:
    """Implements :class:`ad.lm.agents.Critic`: ``values(prompts)`` -> (B,) estimates."""

    def __init__(self, features: LMFeatures, head: ValueHead):
        self.features, self.head = features, head

    @torch.no_grad()
    def values(self, prompts: Sequence[str]) -> np.ndarray:
        return self.head(self.features(prompts)).numpy()

    def save(self, path: str | Path) -> None:
        """Write the value head atomically (``path`` complete or absent)."""
        with atomic_path(path) as tmp:
            torch.save({"state_dict": self.head.state_dict(), "hidden": self.head.net[1].in_features}, tmp)

    @staticmethod
    def load(path: str | Path, features: LMFeatures) -> "LMCritic":
        state = torch.load(path, weights_only=True)
        head = ValueHead(int(state["hidden"]))
        head.load_state_dict(state["state_dict"])
        return LMCritic(features, head)


def fit_critic(features: LMFeatures, prompts: Sequence[str], returns: np.ndarray, epochs: int, lr: float,
               seed: int = 0) -> tuple[LMCritic, list[float]]:
    """Train a value head on (prompt, Monte-Carlo return) pairs, full batch; returns the critic and the MSE curve."""
    x = features(prompts)  # (N, H)
    y = torch.as_tensor(np.array(returns, np.float32))  # (N,) a writable copy
    torch.manual_seed(seed)
    head = ValueHead(x.shape[1])
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        loss = ((head(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return LMCritic(features, head.eval()), losses
