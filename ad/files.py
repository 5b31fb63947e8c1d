"""Files a command reads and writes, in one place.

- Run files written whole or not at all (:func:`atomic_path`, :func:`write_text_atomic` ...): a process killed at any
  moment leaves the old file or the new one.
- Paths a user names (:func:`check_output_folder`, :func:`check_input_file`, :func:`require_trained_model` ...):
  refused, saying why, where they cannot be used.
- Text files a user hands to a command: read as UTF-8 or refused naming the first byte that is not (:func:`read_utf8`).
- The local run folder of ``ad generate`` (:func:`run_folder`), beside a dataset that may live at a remote URL.

Importing this module imports no pyarrow or torch (``--help`` stays light).
"""
from __future__ import annotations

import contextlib
import json
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ad.errors import UserError

if TYPE_CHECKING:
    from ad.history.storage import Location


# ---------------------------------------------------------------------------------------------- atomic run files
@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write the new content to; on leaving the block without an error,
    it replaces ``path`` in one step. On an error (or a kill) ``path`` keeps its old content; the temporary file
    is removed when Python still runs. Creates the folder."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{final.stem}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}{final.suffix}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 minus the umask, as open() gives
    mode = os.fstat(fd).st_mode & 0o777
    os.close(fd)
    try:
        yield tmp
        _fsync(tmp)
        os.chmod(tmp, mode)  # a writer may have replaced the file with one of its own (safetensors: 0600)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):  # the rename made durable, where the platform lets a folder be opened
        _fsync(final.parent)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_path`); returns ``path`` as a Path."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(text.encode("utf-8"))
    return Path(path)


def write_json_atomic(path: str | os.PathLike[str], value: Any, indent: int | None = 2, **dumps: Any) -> Path:
    """Write ``value`` as JSON to ``path`` atomically (``dumps`` go to :func:`json.dumps`, e.g. ``default=str``)."""
    return write_text_atomic(path, json.dumps(value, indent=indent, **dumps))


# ---------------------------------------------------------------------------------------------- paths a user names
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
    problem = "is a folder, not a file" if file.is_dir() else path_problem(file) or "does not exist"
    raise UserError(f"{what} {path} {problem}" + (f"; {advice}" if advice else ""))


# ---------------------------------------------------------------------------------------------- UTF-8 input files
def decode_utf8(raw: bytes, what: str) -> str:
    """``raw`` decoded as UTF-8; UserError ``"<what> is not UTF-8 text (byte 0xff on line 3, column 7) ..."``."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise UserError(f"{what} is not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}, column {column}); "
                        "save it as UTF-8") from None


def read_utf8(path: str | Path, what: str) -> str:
    """The text of the file ``path`` (see :func:`decode_utf8`; ``what`` names it in the error)."""
    return decode_utf8(Path(path).read_bytes(), what)


# ---------------------------------------------------------------------------------------------- run folders
#: The folder of a training run (``ad train --out``) that holds its final model.
MODEL_DIR = "model"


def require_trained_model(run: str | Path, option: str) -> None:
    """Refuse ``run``, the value of ``option``, with a UserError unless it is a finished training run folder: one
    holding the saved model (``model/config.json`` and ``model/model.safetensors``)."""
    folder = Path(run) / MODEL_DIR
    if not ((folder / "config.json").is_file() and (folder / "model.safetensors").is_file()):
        raise UserError(f"{option} {run}: no trained model there (a finished `ad train` run folder holds "
                        f"{MODEL_DIR}/config.json and {MODEL_DIR}/model.safetensors); name such a folder, or drop "
                        "the option")


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
