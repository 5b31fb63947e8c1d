"""Paths a user names: refuse an output path that would mix results into something else or cannot be created,
and say what is wrong with an input file that cannot be read (a folder, a dangling link, a path under a file)."""
from __future__ import annotations

import os
from pathlib import Path

from ad.errors import UserError

#: dataset.json, the file that marks a learning-history dataset (ad.history.layout.DATASET_JSON; not imported here:
#: ad.history loads pyarrow, and input files are checked by commands whose --help must stay light)
DATASET_JSON = "dataset.json"


def path_problem(path: str | Path) -> str | None:
    """Why ``path`` can be neither read nor created as a plain path, or None: a symbolic link to nothing, or a
    path below a file (its "folder" is a file)."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        return f"is a symbolic link to {os.readlink(path)}, which does not exist"
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                return f"cannot exist: {parent} is a file, not a folder"
            break
    return None


def check_folder_path(path: str | Path, option: str = "--out") -> Path:
    """``path`` as a Path, after checking a folder can be there: not an existing file, not a dangling symbolic
    link, not below a file. Creates nothing."""
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{option} {folder} is a file, not a folder; choose a new or empty folder")
    problem = path_problem(folder)
    if problem:
        raise UserError(f"{option} {folder} {problem}; choose another folder")
    return folder


def check_output_folder(path: str | Path, option: str = "--out") -> Path:
    """``path`` as a Path, after checking it can hold a run's files (:func:`check_folder_path`) and is not a
    learning-history dataset (its files would be mixed into the dataset). Creates nothing."""
    folder = check_folder_path(path, option)
    if (folder / DATASET_JSON).is_file():
        raise UserError(f"{option} {folder} is a learning-history dataset ({DATASET_JSON} is there); write "
                        "runs and evaluations to a folder of their own, e.g. runs/<name>")
    return folder


def check_outside_datasets(path: str | Path, option: str = "--out") -> Path:
    """``path`` as a Path, after checking that neither it nor a folder above it is a learning-history dataset
    (files written there would join the dataset's ``**/*.parquet`` glob). Creates nothing."""
    folder = check_folder_path(path, option)
    for candidate in (folder, *folder.absolute().parents):
        if (candidate / DATASET_JSON).is_file():
            where = "is" if candidate == folder else f"lies inside {candidate}, which is"
            raise UserError(f"{option} {folder} {where} a learning-history dataset ({DATASET_JSON} is there); "
                            "write to a folder of its own, outside every dataset")
    return folder


def check_input_file(path: str | Path, what: str, advice: str = "") -> Path:
    """``path`` as a Path when it is a readable file; else a UserError saying whether it is missing, a folder, a
    dangling symbolic link or below a file, ending with ``advice`` (what to pass instead)."""
    file = Path(path).expanduser()
    if file.is_file():
        return file
    if file.is_dir():
        problem = "is a folder, not a file"
    else:
        problem = path_problem(file) or "does not exist"
    raise UserError(f"{what} {path} {problem}" + (f"; {advice}" if advice else ""))
