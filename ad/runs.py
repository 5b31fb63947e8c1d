"""The local run folder of `ad generate`: checkpoints, TensorBoard, summary and plots next to (or apart from) the
dataset, which may live at a remote URL."""
from __future__ import annotations

import os
from pathlib import Path

from ad.atomic import write_text_atomic
from ad.errors import UserError
from ad.history.storage import Location

#: File in a run folder outside the dataset naming the ``--out`` it belongs to.
OWNER_FILE = "out.txt"


def run_folder(out: str, location: Location, run_dir: str = "") -> Path:
    """Local folder of a generation run's side outputs: ``run_dir`` if given, else ``<out>/_run`` for a local
    ``--out``, else ``runs/generate-<name>`` for a remote URL. A folder outside the dataset records which
    ``--out`` it belongs to and refuses another one (a run keeps its resume point there: two datasets whose URLs
    end in the same name must not share it). Creates the folder."""
    local = location.local_path()
    if not run_dir and local is not None:
        folder = Path(local) / "_run"
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    folder = Path(run_dir) if run_dir else (
        Path("runs") / f"generate-{location.base.rstrip('/').rsplit('/', 1)[-1] or 'dataset'}")
    owner = os.path.abspath(local) if local is not None else out.rstrip("/")
    marker = folder / OWNER_FILE
    if marker.is_file() and marker.read_text().strip() != owner:
        raise UserError(f"run folder {folder} holds the run of --out {marker.read_text().strip()}, not of {owner}; "
                        "pass --run-dir <another folder> (or the folder this dataset's run used before)")
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(marker, owner + "\n")
    return folder
