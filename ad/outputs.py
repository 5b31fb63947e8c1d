"""Output folders of runs and evaluations: refuse a path that would mix results into something else."""
from __future__ import annotations

from pathlib import Path

from ad.errors import UserError
from ad.history import layout


def check_output_folder(path: str | Path, option: str = "--out") -> Path:
    """``path`` as a Path, after checking it can hold a run's files: not an existing file, not a learning-history
    dataset (its files would be mixed into the dataset). Creates nothing."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{option} {folder} is a file, not a folder; choose a new or empty folder")
    if (folder / layout.DATASET_JSON).is_file():
        raise UserError(f"{option} {folder} is a learning-history dataset ({layout.DATASET_JSON} is there); write "
                        "runs and evaluations to a folder of their own, e.g. runs/<name>")
    return folder
