"""Shared fixtures: small synthetic learning histories."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def synthetic_dataset(tmp_path):
    """A 3-task synthetic DarkRoom-like dataset (2 streams x 600 transitions per task)."""
    from ad.synthetic import write_synthetic

    path = tmp_path / "synthetic"
    write_synthetic(path, num_tasks=3, num_streams=2, length=600, seed=1, shard_rows=500)
    return path
