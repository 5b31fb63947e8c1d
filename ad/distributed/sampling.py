"""Data-parallel batches: every rank draws the same global batch and keeps its own slice of it (the samplers, and
:class:`ShardedRLDataModule`, the RL-format data module built on them).

With DDP each rank computes gradients on its part of the batch and the gradients are averaged, so
if rank ``r`` of ``W`` takes windows ``[r * B/W, (r+1) * B/W)`` of the global batch of ``B`` windows
that one process would have drawn (same sampler, same seed on every rank), an optimiser step
sees exactly the windows of the single-process run: the loss trajectory stays the same when the
number of processes changes, and no two ranks ever train on the same draw.
"""
from __future__ import annotations

from typing import Iterable, Iterator

import torch

from ad.data import RLDataModule
from ad.errors import UserError


class GlobalBatchSampler:
    """A batch sampler yielding rank ``rank``'s slice of each global batch drawn from ``sampler``.

    Args:
        sampler: index sampler, identical on every rank (e.g. a seeded ``RandomSampler``).
        global_batch: indices per optimiser step over all ranks; a multiple of ``world_size``.
        rank, world_size: this process and the number of processes.
    """

    def __init__(self, sampler: Iterable[int], global_batch: int, rank: int, world_size: int) -> None:
        if global_batch % world_size:
            raise UserError(f"the batch size ({global_batch} windows per step, over all processes) must be a multiple "
                            f"of the number of processes ({world_size} = devices x num_nodes)")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside 0..{world_size - 1}")
        self.sampler = sampler
        self.global_batch = global_batch
        self.per_rank = global_batch // world_size
        self.rank = rank
        self.world_size = world_size

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(int(index))
            if len(batch) == self.global_batch:
                yield batch[self.rank * self.per_rank:(self.rank + 1) * self.per_rank]
                batch = []

    def __len__(self) -> int:
        return len(self.sampler) // self.global_batch  # type: ignore[arg-type]


def shard_loader(loader: torch.utils.data.DataLoader, rank: int, world_size: int) -> torch.utils.data.DataLoader:
    """The same loader, but each of ``world_size`` ranks yields its slice of every global batch.

    ``loader`` must batch with a plain sampler (``batch_size`` set, last partial batch dropped), as the
    data modules' random-window loaders do; its ``batch_size`` is the global batch. With one
    process the loader comes back unchanged.
    """
    if world_size == 1:
        return loader
    if loader.batch_size is None or not loader.drop_last:
        raise ValueError("shard_loader needs a loader with batch_size set and drop_last=True")
    batches = GlobalBatchSampler(loader.sampler, loader.batch_size, rank, world_size)
    return torch.utils.data.DataLoader(loader.dataset, batch_sampler=batches, collate_fn=loader.collate_fn,
                                       num_workers=loader.num_workers, pin_memory=loader.pin_memory,
                                       persistent_workers=loader.persistent_workers,
                                       worker_init_fn=loader.worker_init_fn)


class RankShardedMixin:
    """Mixin for a ``LightningDataModule``: its training loader yields this process's slice of each global batch.

    ``class MyData(RankShardedMixin, MyDataModule)``; the wrapped ``train_dataloader`` must suit
    :func:`shard_loader`. Use ``Trainer(use_distributed_sampler=False)`` so Lightning keeps it.
    """

    def train_dataloader(self):  # type: ignore[no-untyped-def]
        loader = super().train_dataloader()  # type: ignore[misc]
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return loader
        return shard_loader(loader, trainer.global_rank, trainer.world_size)


class ShardedRLDataModule(RankShardedMixin, RLDataModule):
    """:class:`ad.data.RLDataModule` whose ``batch_size`` is the global batch: each of the trainer's processes
    trains on its slice of the same random windows (one process: exactly ``RLDataModule``)."""
