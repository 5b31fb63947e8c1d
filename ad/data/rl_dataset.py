"""`RLTrajectoryDataset`: RL-format windows as a torch Dataset with batched fetching."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ad.formats.rl import TARGET_PROBS, WindowSource, load_window_source, to_torch
from ad.history.reader import HistoryReader


class RLTrajectoryDataset(Dataset):
    """Windows of ``window`` consecutive transitions of one stream, crossing episode boundaries.

    Items are dicts of tensors: states (T,) int64 [or (T, D) float32], actions (T,) int64 [or (T, A) float32],
    rewards (T,) float32, logprobs (T,) float32, timesteps (T,) int64, mask (T,) bool.
    ``__getitems__`` fetches a whole batch in one gather, so use :func:`collate_batch`
    (what :meth:`loader` does) to keep it.

    Args:
        source: a dataset path/URL, a :class:`HistoryReader`, or a prepared :class:`WindowSource`.
        tasks: tasks to include (default: all).
        window: transitions per window.
        stride: distance between consecutive window starts.
        subsample: keep every k-th episode of each stream (the AD paper's subsampling).
        expert_fraction: if set, keep only this last fraction of each stream's episodes (expert data).
        optimal_actions: a task family's ``optimal_actions``: items then also hold ``action_targets`` (T,) int64,
            the optimal action at each row (the target of DPT).
        posterior_targets: ``batch -> (B, T, A)``, a task family's ``posterior_action_probs`` with the dataset's
            metadata bound: items then also hold ``action_target_probs`` (T, A) float32, each action's probability of
            being optimal given the window's rows before (DPT's target in expectation over the tasks the window allows).
    """

    def __init__(self, source: Any, tasks: Sequence[str] | None = None, window: int = 80, stride: int = 1,
                 subsample: int = 1, expert_fraction: float | None = None,
                 optimal_actions: Callable[[dict, str, dict], Any] | None = None,
                 posterior_targets: Callable[[dict], Any] | None = None) -> None:
        self.posterior_targets = posterior_targets
        if isinstance(source, WindowSource):
            self.source = source
        else:
            reader = source if isinstance(source, HistoryReader) else HistoryReader(source)
            self.source = load_window_source(reader, list(tasks) if tasks is not None else reader.tasks(),
                                             window, stride, subsample, expert_fraction, optimal_actions)
        self.window = self.source.window

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {k: v[0] for k, v in self.__getitems__([index]).items()}

    def __getitems__(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        batch = self.source.gather(np.asarray(indices))
        if self.posterior_targets is not None:
            batch[TARGET_PROBS] = np.asarray(self.posterior_targets(batch), dtype=np.float32)  # (B, T, A)
        return to_torch(batch)

    def loader(self, batch_size: int, num_samples: int | None = None, seed: int = 0,
               num_workers: int = 0, history_start_share: float = 0.0) -> torch.utils.data.DataLoader:
        """A DataLoader of batches of random windows, drawn with replacement: every window alike, or, with
        ``history_start_share`` p > 0, a window that begins at a history's first row with probability p (one of them
        alike) and any window alike otherwise."""
        generator = torch.Generator().manual_seed(seed)
        count = num_samples or len(self)
        if history_start_share > 0:
            sampler: torch.utils.data.Sampler = torch.utils.data.WeightedRandomSampler(
                history_start_weights(self.source, history_start_share), count, replacement=True,
                generator=generator)
        else:
            sampler = torch.utils.data.RandomSampler(self, replacement=True, num_samples=count, generator=generator)
        return torch.utils.data.DataLoader(self, batch_size=batch_size, sampler=sampler, collate_fn=collate_batch,
                                           num_workers=num_workers, drop_last=True, persistent_workers=num_workers > 0)


def history_start_weights(source: WindowSource, share: float) -> torch.Tensor:
    """(W,) float64 sampling weights of ``source``'s windows: ``share`` of the mass spread evenly over the windows
    that begin at a history's (a stream's) first row, the rest over all windows."""
    weights = torch.full((len(source),), (1.0 - share) / len(source), dtype=torch.float64)
    firsts = torch.as_tensor(source.history_starts)
    weights[firsts] += share / len(firsts)
    return weights


def collate_batch(batch: Any) -> dict[str, torch.Tensor]:
    """Pass a batch fetched by ``__getitems__`` through; stack single items otherwise."""
    if isinstance(batch, dict):
        return batch
    return {key: torch.stack([item[key] for item in batch]) for key in batch[0]}
