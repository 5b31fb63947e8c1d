"""Language-format training windows over RL-format window sources (discrete states and actions).

:class:`TransitionWindows` serves the windows of a :class:`ad.formats.rl.WindowSource` (the RL format's
subsampling and expert-only selection) as token ids, with the truncation rule of :mod:`models.lm.context`, a batch
at once (``__getitems__``): one numpy gather through lookup tables (:class:`WordTable`) when the template writes
every field as one token, else :func:`models.lm.context.encode_window` per window (the same tokens).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ad.data.language_dataset import pad_collate
from ad.formats.language import Template
from ad.formats.rl import WindowSource
from models.lm.context import TruncationWarner, encode_transition, encode_window, keep_newest_batch


class WordTable:
    """Token ids of every field of a one-token-per-field template (boundary, state, action, reward lookups), built by
    encoding representative rows through the template; :meth:`build` returns None when a field takes several tokens."""

    def __init__(self, boundary: int, states: np.ndarray, actions: np.ndarray, reward_values: np.ndarray,
                 reward_ids: np.ndarray):
        self.boundary = boundary
        self.states = states  # (S, k) tokens of state s (k = 1 for `words`, 2 for `grid<N>`)
        self.actions = actions  # (A,) token of action a
        self.reward_values = reward_values  # (R,) sorted distinct rewards
        self.reward_ids = reward_ids  # (R,) their tokens

    @classmethod
    def build(cls, template: Template, tokenizer: Any, num_states: int, num_actions: int,
              rewards: Sequence[float]) -> "WordTable | None":
        """The table, or None if the template / tokenizer pair writes some field as several tokens."""
        def parts(state: int, action: int, reward: float, step: int) -> tuple[np.ndarray, ...]:
            t = encode_transition(template, tokenizer, {"state": state, "action": action, "reward": reward,
                                                        "step": step})
            return t.prompt, t.action, t.after

        first, _, _ = parts(0, 0, 0.0, 0)
        width = len(first) - 1  # tokens of a state (the rest of an episode start's prompt is the boundary)
        states, actions, reward_ids = [], [], []
        for s in range(num_states):
            prompt, _, _ = parts(s, 0, 0.0, 1)
            start, _, _ = parts(s, 0, 0.0, 0)
            if width < 1 or len(prompt) != width or len(start) != width + 1 or start[0] != first[0]:
                return None
            states.append(prompt)
        for a in range(num_actions):
            _, action, _ = parts(0, a, 0.0, 1)
            if len(action) != 1:
                return None
            actions.append(action[0])
        values = np.unique(np.asarray(rewards, dtype=np.float32))
        for r in values:
            _, _, after = parts(0, 0, float(r), 1)
            if len(after) != 1:
                return None
            reward_ids.append(after[0])
        return cls(int(first[0]), np.asarray(states, np.int64).reshape(num_states, width), np.asarray(actions, np.int64), values,
                   np.asarray(reward_ids, np.int64))

    def reward_tokens(self, rewards: np.ndarray) -> np.ndarray:
        """Tokens of reward values (each must be one of ``reward_values``)."""
        index = np.searchsorted(self.reward_values, rewards).clip(0, len(self.reward_values) - 1)
        if not np.array_equal(self.reward_values[index], rewards.astype(np.float32)):
            raise ValueError("a reward value outside the table's vocabulary")
        return self.reward_ids[index]

    def encode(self, states: np.ndarray, actions: np.ndarray, rewards: np.ndarray, steps: np.ndarray,
               max_tokens: int, loss_on: str = "actions") -> tuple[dict[str, torch.Tensor], int]:
        """Right-padded (B, L) input_ids / labels / attention_mask of (B, T) windows, and the most transitions
        dropped from a window (whole oldest transitions, :func:`models.lm.context.keep_newest_batch`)."""
        B, T = actions.shape
        k = self.states.shape[1]
        slots = np.concatenate([np.full((B, T, 1), self.boundary), self.states[states], self.actions[actions][..., None],
                                self.reward_tokens(rewards)[..., None]], -1)  # (B, T, k+3): boundary?, state, a, r
        S = k + 3
        valid = np.ones((B, T, S), bool)
        valid[..., 0] = steps == 0  # the boundary word only at an episode start
        lengths = valid.sum(-1)  # (B, T) tokens per transition
        start = np.minimum(keep_newest_batch(lengths, max_tokens), T - 1)  # (B,) always keep the newest
        valid &= (np.arange(T)[None, :] >= start[:, None])[..., None]
        is_action = np.zeros((B, T, S), bool)
        is_action[..., k + 1] = True
        slots, valid, is_action = slots.reshape(B, S * T), valid.reshape(B, S * T), is_action.reshape(B, S * T)
        order = np.argsort(~valid, axis=1, kind="stable")  # (B, S*T) kept tokens first, in order
        n = valid.sum(1)  # (B,)
        L = int(n.max())
        ids = np.take_along_axis(slots, order, 1)[:, :L]  # (B, L)
        keep = np.arange(L)[None, :] < n[:, None]  # (B, L) real tokens (the rest is right padding)
        acts = np.take_along_axis(is_action, order, 1)[:, :L] & keep
        labels = np.where(keep if loss_on == "all" else acts, ids, -100)
        ids = np.where(keep, ids, 0)
        batch = {"input_ids": torch.from_numpy(ids), "labels": torch.from_numpy(labels),
                 "attention_mask": torch.from_numpy(keep.astype(np.int64))}
        return batch, int(start.max())


class TransitionWindows(Dataset):
    """Windows of a :class:`WindowSource` (already subsampled / expert-only) as Language-format tokens (see the module
    docstring): ``max_tokens`` per window, the loss on "actions" or "all", right padding ``pad_id`` masked out."""

    def __init__(self, source: WindowSource, template: Template, tokenizer: Any, max_tokens: int,
                 loss_on: str = "actions", pad_id: int = 0, num_states: int = 0, num_actions: int = 0):
        self.source, self.template, self.tokenizer = source, template, tokenizer
        self.max_tokens, self.loss_on, self.pad_id = max_tokens, loss_on, pad_id
        self.warner = TruncationWarner(max_tokens, "training windows")
        self.table = None
        if num_states and num_actions and source.columns["states"].ndim == 1:
            self.table = WordTable.build(template, tokenizer, num_states, num_actions,
                                         np.unique(source.columns["rewards"]))

    def __len__(self) -> int:
        return len(self.source)

    def rows(self, index: int) -> dict[str, np.ndarray]:
        """History columns (state, action, reward, step) of window ``index``."""
        w = self.source.gather([index])
        return {"state": w["states"][0], "action": w["actions"][0], "reward": w["rewards"][0],
                "step": w["timesteps"][0]}

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {key: value[0] for key, value in self.__getitems__([index]).items()}  # (L,) each, no padding

    def __getitems__(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        """A right-padded batch (B, L) of windows ``indices``."""
        if self.table is not None:
            w = self.source.gather(indices)  # (B, T) columns
            batch, dropped = self.table.encode(w["states"], w["actions"], w["rewards"], w["timesteps"],
                                               self.max_tokens, self.loss_on)
            batch["input_ids"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, self.pad_id)
            self.warner(dropped)
            return batch
        items = []
        for index in indices:
            item = encode_window(self.template, self.tokenizer, self.rows(int(index)), self.max_tokens,
                                 self.loss_on, self.warner)
            ids = torch.from_numpy(item["input_ids"])
            items.append({"input_ids": ids, "labels": torch.from_numpy(item["labels"]),
                          "attention_mask": torch.ones_like(ids)})
        return pad_collate(items, self.pad_id)
