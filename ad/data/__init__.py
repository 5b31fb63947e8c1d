"""Torch datasets and the Lightning DataModule over learning histories (each imported on first use, so reading a
split does not import torch or Lightning)."""
from ad.registry import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "RLDataModule": "ad.data.datamodule", "LanguageTrajectoryDataset": "ad.data.language_dataset",
    "pad_collate": "ad.data.language_dataset", "RLTrajectoryDataset": "ad.data.rl_dataset",
    "collate_batch": "ad.data.rl_dataset", "task_split": "ad.history.reader"})


def parquet_glob(path) -> str:
    """The glob that ``datasets.load_dataset("parquet", data_files=...)`` and DuckDB/polars read shards with."""
    return str(path).rstrip("/") + "/**/*.parquet"


__all__ = ["RLDataModule", "RLTrajectoryDataset", "LanguageTrajectoryDataset", "collate_batch", "pad_collate",
           "task_split", "parquet_glob"]
