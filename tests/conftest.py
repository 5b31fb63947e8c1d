"""Shared fixtures: small synthetic learning histories. The helpers tests share with the benchmark scripts live
in ``benchmarks/helpers/`` (outside the installed packages), so the repository root goes on the path."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def synthetic_dataset(tmp_path):
    """A 3-task synthetic DarkRoom-like dataset (2 streams x 600 transitions per task)."""
    from benchmarks.helpers.synthetic import write_synthetic

    path = tmp_path / "synthetic"
    write_synthetic(path, num_tasks=3, num_streams=2, length=600, seed=1, shard_rows=500)
    return path
