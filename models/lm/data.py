"""`LMDataModule`: Language-format windows of training tasks (fit) and held-out tasks (validation)."""
from __future__ import annotations

from functools import partial
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from ad.data import LanguageTrajectoryDataset, pad_collate, task_split
from ad.distributed.sampling import RankShardedMixin
from ad.errors import UserError
from ad.history import HistoryReader
from models.lm.context import TruncationWarner, encode_window


class LMWindows(Dataset):
    """Windows of a :class:`LanguageTrajectoryDataset`, tokenised transition by transition.

    Unlike the base dataset (which cuts tokens), a window over ``max_tokens`` loses whole oldest transitions,
    exactly as :class:`models.lm.policy.LMPolicy` truncates its context.
    """

    def __init__(self, windows: LanguageTrajectoryDataset, max_tokens: int, loss_on: str = "actions"):
        self.windows = windows
        self.max_tokens = max_tokens
        self.loss_on = loss_on
        self.warner = TruncationWarner(max_tokens, "training windows")

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        item = encode_window(self.windows.template, self.windows.tokenizer, self.windows.rows(index),
                             self.max_tokens, self.loss_on, self.warner)
        ids = torch.from_numpy(item["input_ids"])
        return {"input_ids": ids, "labels": torch.from_numpy(item["labels"]),
                "attention_mask": torch.ones_like(ids)}


class LMDataModule(L.LightningDataModule):
    """Owns the train / held-out split of a dataset and the loaders of tokenised windows.

    Args:
        path: dataset folder or URL.
        tokenizer: Hugging Face tokenizer (with a pad token).
        template: Language-format template name.
        window: transitions per window; stride: distance between window starts.
        max_tokens: token budget of a window; loss_on: "actions" or "all".
        batch_size, val_batches, steps_per_epoch, num_workers, seed: loader settings.
    """

    def __init__(self, path: Any, tokenizer: Any, template: str = "compact", window: int = 40, stride: int = 5,
                 max_tokens: int = 512, loss_on: str = "actions", batch_size: int = 4, val_batches: int = 4,
                 steps_per_epoch: int = 1000, num_workers: int = 0, seed: int = 0) -> None:
        super().__init__()
        self.reader = path if isinstance(path, HistoryReader) else HistoryReader(path)
        self.spec = self.reader.spec
        self.metadata = self.reader.metadata
        self.tokenizer = tokenizer
        self.template, self.window, self.stride = template, window, stride
        self.max_tokens, self.loss_on = max_tokens, loss_on
        self.batch_size, self.val_batches, self.steps_per_epoch = batch_size, val_batches, steps_per_epoch
        self.num_workers, self.seed = num_workers, seed
        self.train_tasks, self.heldout_tasks = task_split(self.reader)
        self.train_set: LMWindows | None = None
        self.val_set: LMWindows | None = None

    def _windows(self, tasks: list[str], stride: int) -> LMWindows:
        base = LanguageTrajectoryDataset(self.reader, self.tokenizer, self.template, tasks=tasks, window=self.window,
                                         stride=stride, loss_on=self.loss_on, max_tokens=self.max_tokens)
        return LMWindows(base, self.max_tokens, self.loss_on)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is None:
            self.train_set = self._windows(self.train_tasks, self.stride)
        if self.val_set is None and self.heldout_tasks:
            try:
                self.val_set = self._windows(self.heldout_tasks, self.window)
            except UserError:
                self.val_set = None

    def _loader(self, dataset: LMWindows, batches: int, seed: int, workers: int) -> DataLoader:
        sampler = RandomSampler(dataset, replacement=True, num_samples=batches * self.batch_size,
                                generator=torch.Generator().manual_seed(seed))
        return DataLoader(dataset, batch_size=self.batch_size, sampler=sampler, num_workers=workers, drop_last=True,
                          collate_fn=partial(pad_collate, pad_id=int(self.tokenizer.pad_token_id)))

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None, "call setup() first"
        return self._loader(self.train_set, self.steps_per_epoch, self.seed, self.num_workers)

    def val_dataloader(self):
        if self.val_set is None:
            return []
        return self._loader(self.val_set, self.val_batches, self.seed + 1, 0)


class ShardedLMDataModule(RankShardedMixin, LMDataModule):
    """:class:`LMDataModule` whose ``batch_size`` is the global batch: each of the trainer's processes trains on
    its slice of the same random windows (one process: exactly ``LMDataModule``)."""
