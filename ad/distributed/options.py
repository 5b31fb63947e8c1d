"""Process-layout options shared by `ad train rl` and `ad train lm` (Lightning's accelerator / devices / nodes /
strategy). Imports no torch, so config modules and `ad --help` stay light."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ad.config import option, refuse
from ad.errors import UserError


_GROUP = "several processes / machines (Lightning)"


@dataclass
class DistributedOptions:
    """Several processes per machine and several machines (Lightning DDP / FSDP); the defaults are one process."""

    accelerator: str = option("auto", "Lightning accelerator: auto, cpu, gpu, ...", group=_GROUP, runtime=True)
    devices: int = option(1, "training processes per machine (GPUs, or CPU processes with --accelerator cpu)",
                          group=_GROUP, runtime=True)
    num_nodes: int = option(1, "machines; launch the same command on each (Lightning reads MASTER_ADDR, "
                               "MASTER_PORT, NODE_RANK from the environment, or SLURM / torchrun's variables)",
                        group=_GROUP, runtime=True)
    strategy: str = option("auto", "Lightning strategy: auto (ddp when devices x num_nodes > 1; gloo on CPU), "
                                   "ddp, ddp_spawn, fsdp (`ad train lm`: shards the model over the processes, "
                                   "one unit per decoder layer), ...", group=_GROUP, runtime=True)


def check_distributed_options(config: DistributedOptions, batch_size: int) -> None:
    """UserError unless devices / num_nodes are positive and the global ``batch_size`` splits evenly over them."""
    refuse(config, ("devices", "num_nodes"), lambda v: v < 1, "must be at least 1")
    processes = config.devices * config.num_nodes
    if batch_size % processes:
        raise UserError(f"--batch-size {batch_size} (the global batch) must be a multiple of the number of "
                        f"processes, devices x num_nodes = {processes}")


def first_local_process() -> bool:
    """False in the extra processes Lightning starts on this machine (under ``ddp`` they re-run the command)."""
    return int(os.environ.get("LOCAL_RANK", "0")) == 0
