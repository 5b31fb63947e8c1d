"""Torch datasets and the Lightning DataModule over learning histories."""
from ad.data.datamodule import RLDataModule
from ad.data.language_dataset import LanguageTrajectoryDataset, pad_collate
from ad.data.rl_dataset import RLTrajectoryDataset, collate_batch
from ad.data.splits import task_split


def hf_dataset(path, tasks=None, columns=None):
    """A learning history as a Hugging Face ``datasets.Dataset`` (see HistoryReader.to_hf_dataset)."""
    from ad.history.reader import HistoryReader

    return HistoryReader(path).to_hf_dataset(tasks, columns)


def parquet_glob(path) -> str:
    """The glob that ``datasets.load_dataset("parquet", data_files=...)`` and DuckDB/polars read shards with."""
    return str(path).rstrip("/") + "/**/*.parquet"


__all__ = ["RLDataModule", "RLTrajectoryDataset", "LanguageTrajectoryDataset", "collate_batch", "pad_collate",
           "task_split", "hf_dataset", "parquet_glob"]
