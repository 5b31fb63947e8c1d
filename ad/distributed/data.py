"""Data modules whose training batches are split over data-parallel processes (see :mod:`ad.distributed.sampling`)."""
from __future__ import annotations

from ad.data import RLDataModule
from ad.distributed.sampling import RankShardedMixin


class ShardedRLDataModule(RankShardedMixin, RLDataModule):
    """:class:`ad.data.RLDataModule` whose ``batch_size`` is the global batch: each of the trainer's processes
    trains on its slice of the same random windows (one process: exactly ``RLDataModule``)."""
