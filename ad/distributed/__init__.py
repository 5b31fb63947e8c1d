"""Beyond one machine: run work units on a backend (in-process or Ray), and share batches over DDP ranks.

Generation (``ad generate <task> --backend ray``): :func:`run_units` over :class:`WorkUnit` s. Training:
:mod:`ad.distributed.sampling`. Ray is optional; nothing here imports it until the Ray backend runs.
"""

from ad.registry import lazy_exports
from ad.distributed.units import BACKENDS, WorkUnit, check_backend_options, require_ray, run_units

_LAZY = {"GlobalBatchSampler": "ad.distributed.sampling", "shard_loader": "ad.distributed.sampling",
         "RankShardedMixin": "ad.distributed.sampling", "ShardedRLDataModule": "ad.distributed.sampling"}  # torch, lightning

__all__ = ["BACKENDS", "WorkUnit", "run_units", "check_backend_options", "require_ray", *_LAZY]
__getattr__ = lazy_exports(__name__, _LAZY)
