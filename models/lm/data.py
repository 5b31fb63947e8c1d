"""`LMDataModule`: Language-format windows of training tasks (fit) and held-out tasks (validation)."""
from __future__ import annotations

from functools import partial
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler

from ad.data import LanguageTrajectoryDataset, pad_collate, task_split
from ad.data.rl_dataset import collate_batch
from ad.distributed.sampling import RankShardedMixin
from ad.errors import UserError
from ad.formats.language import get_template
from ad.formats.rl import load_window_source
from ad.history import HistoryReader
from models.lm.context import TruncationWarner, encode_window
from models.lm.windows import TransitionWindows


class LMWindows(Dataset):
    """Windows of a :class:`LanguageTrajectoryDataset`, tokenised transition by transition; a window over
    ``max_tokens`` loses whole oldest transitions, as :class:`models.lm.policy.LMPolicy` truncates its context."""

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

    Discrete-state datasets are windowed as the RL format does (:func:`ad.formats.rl.load_window_source`: the same
    ``subsample`` and expert-only selection, ``expert_fraction`` of each stream's last episodes) and served by
    :class:`models.lm.windows.TransitionWindows`; text histories by :class:`LMWindows` (no episode selection).
    ``window`` transitions per window, ``stride`` between window starts, ``max_tokens`` per window, ``loss_on``
    "actions" or "all"; the tokenizer needs a pad token.
    """

    def __init__(self, path: Any, tokenizer: Any, template: str = "compact", window: int = 40, stride: int = 5,
                 max_tokens: int = 512, loss_on: str = "actions", batch_size: int = 4, val_batches: int = 4,
                 steps_per_epoch: int = 1000, num_workers: int = 0, seed: int = 0, subsample: int = 1,
                 expert_only: bool = False, expert_fraction: float = 0.1) -> None:
        super().__init__()
        self.reader = path if isinstance(path, HistoryReader) else HistoryReader(path)
        self.spec = self.reader.spec
        self.metadata = self.reader.metadata
        self.tokenizer = tokenizer
        self.template, self.window, self.stride = template, window, stride
        self.max_tokens, self.loss_on = max_tokens, loss_on
        self.subsample, self.expert_fraction = subsample, expert_fraction if expert_only else None
        self.batch_size, self.val_batches, self.steps_per_epoch = batch_size, val_batches, steps_per_epoch
        self.num_workers, self.seed = num_workers, seed
        self.train_tasks, self.heldout_tasks = task_split(self.reader)
        self.discrete = self.spec.state.kind == "discrete" and self.spec.action.kind == "discrete"
        if not self.discrete and (subsample > 1 or expert_only):
            raise UserError("--subsample and --expert-only need discrete states and actions (e.g. DarkRoom); "
                            f"dataset {self.reader.location.base} has {self.spec.state.kind} states")
        self.train_set: Dataset | None = None
        self.val_set: Dataset | None = None

    def _windows(self, tasks: list[str], stride: int, last_fraction: float | None) -> Dataset:
        if self.discrete:
            source = load_window_source(self.reader, tasks, self.window, stride, self.subsample, last_fraction)
            return TransitionWindows(source, get_template(self.template), self.tokenizer, self.max_tokens,
                                     self.loss_on, int(self.tokenizer.pad_token_id), int(self.spec.state.n),
                                     int(self.spec.action.n))
        base = LanguageTrajectoryDataset(self.reader, self.tokenizer, self.template, tasks=tasks, window=self.window,
                                         stride=stride, loss_on=self.loss_on, max_tokens=self.max_tokens)
        return LMWindows(base, self.max_tokens, self.loss_on)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is None:
            self.train_set = self._windows(self.train_tasks, self.stride, self.expert_fraction)
        if self.val_set is None and self.heldout_tasks:
            try:
                self.val_set = self._windows(self.heldout_tasks, self.window, None)
            except UserError:
                self.val_set = None

    def _loader(self, dataset: Dataset, batches: int, seed: int, workers: int) -> DataLoader:
        sampler = RandomSampler(dataset, replacement=True, num_samples=batches * self.batch_size,
                                generator=torch.Generator().manual_seed(seed))
        collate = (collate_batch if isinstance(dataset, TransitionWindows)  # batches come whole (__getitems__)
                   else partial(pad_collate, pad_id=int(self.tokenizer.pad_token_id)))
        return DataLoader(dataset, batch_size=self.batch_size, sampler=sampler, num_workers=workers, drop_last=True,
                          collate_fn=collate)

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
