"""`LanguageTrajectoryDataset`: history windows serialised by a template and tokenised."""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ad.errors import UserError
from ad.formats.language import get_template, tokenize_segments
from ad.history.reader import HistoryReader

_COLUMNS = ["episode", "step", "state", "action", "reward"]


class LanguageTrajectoryDataset(Dataset):
    """Windows of ``window`` consecutive rows of one stream, rendered as text and tokenised.

    Items: input_ids (L,), labels (L,) with -100 where no loss is taken (non-action tokens when
    ``loss_on="actions"``), attention_mask (L,). Windows longer than ``max_tokens`` lose their
    oldest transitions (a warning is given once).

    Args:
        source: dataset path/URL or :class:`HistoryReader`.
        tokenizer: any Hugging Face tokenizer.
        template: template name (see :data:`ad.formats.TEMPLATES`).
        tasks: tasks to include (default all).
        window: rows per window; stride: distance between window starts.
        loss_on: "actions" (default) or "all" tokens.
        max_tokens: token budget per window.
    """

    def __init__(self, source: Any, tokenizer: Any, template: str = "compact", tasks: Sequence[str] | None = None,
                 window: int = 40, stride: int | None = None, loss_on: str = "actions",
                 max_tokens: int = 1024) -> None:
        if loss_on not in ("actions", "all"):
            raise UserError(f"loss_on must be 'actions' or 'all', got {loss_on!r}")
        reader = source if isinstance(source, HistoryReader) else HistoryReader(source)
        self.template = get_template(template)
        self.tokenizer = tokenizer
        self.loss_on = loss_on
        self.max_tokens = int(max_tokens)
        self.window = int(window)
        stride = stride or self.window
        self._streams = reader.streams(tasks=list(tasks) if tasks is not None else None, columns=_COLUMNS)
        self._index: list[tuple[int, int]] = []
        for s, stream in enumerate(self._streams):
            length = min(self.window, len(stream))
            self._index.extend((s, start) for start in range(0, len(stream) - length + 1, stride))
        if not self._index:
            raise UserError(f"no windows in {reader.location.base}: streams are empty")
        self._warned = False

    def __len__(self) -> int:
        return len(self._index)

    def rows(self, index: int) -> dict[str, Any]:
        """The raw rows (columns) of window ``index``."""
        s, start = self._index[index]
        cols = self._streams[s].columns
        return {k: v[start:start + self.window] for k, v in cols.items()}

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        segments = self.template.segments(self.rows(index))
        tokens = tokenize_segments(self.tokenizer, segments)
        ids, mask = tokens.input_ids, tokens.action_mask
        if len(ids) > self.max_tokens:
            if not self._warned:
                warnings.warn(f"windows exceed max_tokens={self.max_tokens}; oldest transitions are dropped",
                              stacklevel=2)
                self._warned = True
            ids, mask = ids[-self.max_tokens:], mask[-self.max_tokens:]
        labels = ids.copy() if self.loss_on == "all" else np.where(mask, ids, -100)
        return {"input_ids": torch.from_numpy(ids), "labels": torch.from_numpy(labels),
                "attention_mask": torch.ones(len(ids), dtype=torch.long)}


def pad_collate(batch: list[dict[str, torch.Tensor]], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Right-pad a list of tokenised windows into (B, L) tensors."""
    length = max(len(item["input_ids"]) for item in batch)
    out = {"input_ids": torch.full((len(batch), length), pad_id, dtype=torch.long),
           "labels": torch.full((len(batch), length), -100, dtype=torch.long),
           "attention_mask": torch.zeros((len(batch), length), dtype=torch.long)}
    for i, item in enumerate(batch):
        n = len(item["input_ids"])
        for key in out:
            out[key][i, :n] = item[key]
    return out
