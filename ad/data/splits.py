"""Train / held-out task splits read from dataset metadata (or made deterministically)."""
from __future__ import annotations

import numpy as np

from ad.errors import UserError
from ad.history.reader import HistoryReader


def task_split(reader: HistoryReader, heldout_fraction: float = 0.2, seed: int = 0) -> tuple[list[str], list[str]]:
    """(train tasks, held-out tasks) among the dataset's complete tasks.

    Uses ``metadata["split"]`` when the generator recorded one; otherwise holds out a
    deterministic ``heldout_fraction`` of tasks chosen with ``seed``.
    """
    present = reader.tasks()
    split = reader.metadata.get("split")
    if split:
        train = [t for t in split.get("train", []) if t in present]
        heldout = [t for t in split.get("heldout", []) if t in present]
    else:
        order = np.random.default_rng(seed).permutation(len(present))
        k = int(round(len(present) * heldout_fraction))
        heldout = sorted(present[i] for i in order[:k])
        train = sorted(t for t in present if t not in heldout)
    if not train:
        raise UserError(f"dataset {reader.location.base} has no complete training tasks; finish `ad generate` first")
    return train, heldout
