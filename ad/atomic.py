"""Files written whole or not at all: every run file (configs, eval outputs, summaries, reports, figures, model
weights) goes through here.

A file is written under a temporary name in its own folder (same suffix, so writers that pick a format from it
keep working), flushed to disk, given the mode a plain ``open`` would give it (the umask applies), then renamed
over the final name. A process killed at any moment leaves the old file or the new one, never a truncated one,
and at worst a ``<name>.tmp-*`` file that the next write of the same name does not care about.
"""
from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

__all__ = ["atomic_path", "write_bytes_atomic", "write_text_atomic", "write_json_atomic"]


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
        _sync(tmp)
        os.chmod(tmp, mode)  # a writer may have replaced the file with one of its own (safetensors: 0600)
        os.replace(tmp, final)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    _sync_folder(final.parent)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`); returns ``path`` as a Path."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], value: Any, indent: int | None = 2, **dumps: Any) -> Path:
    """Write ``value`` as JSON to ``path`` atomically (``dumps`` go to :func:`json.dumps`, e.g. ``default=str``)."""
    return write_text_atomic(path, json.dumps(value, indent=indent, **dumps))


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (where the platform lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
