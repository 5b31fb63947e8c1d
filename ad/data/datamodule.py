"""`RLDataModule`: owns the train / held-out split and the loaders of RL-format windows."""
from __future__ import annotations

import functools
from typing import Any

import lightning as L

from ad.data.rl_dataset import RLTrajectoryDataset
from ad.errors import UserError
from ad.history.reader import HistoryReader, task_split
from ad.registry import optimal_actions, posterior_action_probs


class RLDataModule(L.LightningDataModule):
    """RL-format windows of training tasks for fitting, of held-out tasks for validation.

    Args:
        path: dataset folder or URL.
        window: transitions per window.
        batch_size: windows per batch.
        subsample: keep every k-th episode of each stream.
        expert_only: train on the last ``expert_fraction`` of each stream's episodes only.
        expert_fraction: fraction of episodes that counts as expert data.
        optimal_targets: give every window ``action_targets``, the optimal action at each row from the dataset's task
            family (:func:`ad.registry.optimal_actions`; a UserError if the family has none): DPT's target.
        posterior_targets: give every window ``action_target_probs`` (not with ``optimal_targets``), each action's
            probability of being optimal at each row given the window's rows before it, under the family's task
            distribution (:func:`ad.registry.posterior_action_probs`; a UserError if the family has none): DPT's
            target in expectation over the tasks the window allows.
        stride: distance between window starts.
        steps_per_epoch: batches in one "epoch" of random windows.
        val_batches: held-out batches per validation run.
        num_workers: data-loader worker processes.
        seed: seed of the random window draws.
        history_start_share: share of training windows drawn from those that begin at a history's first row
            (:meth:`RLTrajectoryDataset.loader`); held-out windows are drawn alike.
    """

    def __init__(self, path: Any, window: int = 80, batch_size: int = 64, subsample: int = 1,
                 expert_only: bool = False, expert_fraction: float = 0.1, stride: int = 1,
                 steps_per_epoch: int = 1000, val_batches: int = 4, num_workers: int = 0, seed: int = 0,
                 optimal_targets: bool = False, history_start_share: float = 0.0,
                 posterior_targets: bool = False) -> None:
        super().__init__()
        self.path = path
        self.window = window
        self.batch_size = batch_size
        self.subsample = subsample
        self.expert_fraction = expert_fraction if expert_only else None
        self.stride = stride
        self.steps_per_epoch = steps_per_epoch
        self.val_batches = val_batches
        self.num_workers = num_workers
        self.seed = seed
        self.history_start_share = history_start_share
        self.reader = HistoryReader(path)
        self.spec = self.reader.spec
        self.metadata = self.reader.metadata
        self.train_tasks, self.heldout_tasks = task_split(self.reader)
        if optimal_targets and posterior_targets:
            raise ValueError("optimal_targets and posterior_targets are two kinds of DPT target: ask for one")
        self.optimal_actions = (optimal_actions(self.reader.family, f"DPT (optimal-action targets) on dataset {path}")
                                if optimal_targets else None)
        self.posterior_targets = (functools.partial(posterior_action_probs(
            self.reader.family, f"DPT with posterior targets on dataset {path}"), self.metadata)
            if posterior_targets else None)
        self.train_set: RLTrajectoryDataset | None = None
        self.val_set: RLTrajectoryDataset | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is None:
            self.train_set = RLTrajectoryDataset(self.reader, self.train_tasks, self.window, self.stride,
                                                 self.subsample, self.expert_fraction, self.optimal_actions,
                                                 self.posterior_targets)
        if self.val_set is None and self.heldout_tasks:
            try:
                self.val_set = RLTrajectoryDataset(self.reader, self.heldout_tasks, self.window,
                                                   max(self.stride, self.window), self.subsample, None,
                                                   self.optimal_actions, self.posterior_targets)
            except UserError:
                self.val_set = None

    def train_dataloader(self):
        assert self.train_set is not None, "call setup() first"
        return self.train_set.loader(self.batch_size, num_samples=self.steps_per_epoch * self.batch_size,
                                     seed=self.seed, num_workers=self.num_workers,
                                     history_start_share=self.history_start_share)

    def val_dataloader(self):
        if self.val_set is None:
            return []
        return self.val_set.loader(self.batch_size, num_samples=self.val_batches * self.batch_size,
                                   seed=self.seed + 1, num_workers=0)
