"""Where a dataset lives: a local path or any pyarrow / fsspec filesystem URL.

Everything past the CLI boundary goes through :class:`Location`, never through
POSIX paths, so ``file://``, ``s3://``, ``gs://`` and in-memory fsspec filesystems work alike.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from ad.errors import UserError
from ad.files import write_json_atomic


@dataclass(frozen=True)
class Location:
    """A filesystem plus a base directory inside it."""

    fs: pafs.FileSystem
    base: str
    url: str = ""  #: the URL the user gave (``memory://x``), shown in messages; empty for a local path

    @staticmethod
    def of(path: "str | os.PathLike[str] | Location", filesystem: Any = None) -> "Location":
        """Resolve a path or URL; ``filesystem`` may be a pyarrow or fsspec filesystem."""
        if isinstance(path, Location):
            return path
        text = os.fspath(path)
        if filesystem is not None:
            fs = filesystem if isinstance(filesystem, pafs.FileSystem) else pafs.PyFileSystem(
                pafs.FSSpecHandler(filesystem))
            return Location(fs, text.rstrip("/"))
        if "://" in text:
            return dataclasses.replace(_from_url(text), url=text.rstrip("/"))
        return Location(pafs.LocalFileSystem(), os.path.abspath(text))

    def local_path(self) -> str | None:
        """The POSIX path of this location when it is on the local disk (a plain path or file:// URL), else None."""
        return self.base if isinstance(self.fs, pafs.LocalFileSystem) else None

    def join(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    def __str__(self) -> str:
        return self.url or self.base

    # ------------------------------------------------------------------ helpers
    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.fs.get_file_info(path).type == pafs.FileType.Directory

    def makedirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def listdir(self, path: str) -> list[str]:
        """Base names in a directory (empty if it does not exist)."""
        if not self.is_dir(path):
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(path, recursive=False))
        return sorted(info.base_name for info in infos)

    def delete_dir(self, path: str) -> None:
        if self.is_dir(path):
            self.fs.delete_dir(path)

    def move(self, src: str, dst: str) -> None:
        self.fs.move(src, dst)

    def size(self, path: str) -> int:
        return int(self.fs.get_file_info(path).size or 0)

    def read_json(self, path: str) -> Any:
        with self.fs.open_input_stream(path) as stream:
            return json.loads(stream.read().decode())

    def write_json_atomic(self, path: str, data: Any) -> None:
        """Write JSON to a temporary name, then rename over ``path``; on failure (disk full, read-only) the
        temporary file is removed and ``path`` keeps its old content. A local file goes through
        :func:`ad.files.write_json_atomic` (flushed to disk before the rename)."""
        if self.local_path() is not None:
            write_json_atomic(path, data, sort_keys=False)
            return
        tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            with self.fs.open_output_stream(tmp) as stream:
                stream.write(json.dumps(data, indent=2, sort_keys=False).encode())
            self.fs.move(tmp, path)
        except BaseException:
            with contextlib.suppress(Exception):  # it may never have been created
                self.fs.delete_file(tmp)
            raise

    def is_file(self, path: str) -> bool:
        return self.fs.get_file_info(path).type == pafs.FileType.File

    def sizes(self, path: str) -> dict[str, int]:
        """Size of every file below ``path`` by path relative to it (one recursive listing)."""
        if not self.is_dir(path):
            return {}
        infos = self.fs.get_file_info(pafs.FileSelector(path, recursive=True))
        prefix = path.rstrip("/") + "/"
        return {i.path[len(prefix):] if i.path.startswith(prefix) else i.path: int(i.size or 0)
                for i in infos if i.type == pafs.FileType.File}


def _from_url(url: str) -> Location:
    """A URL through pyarrow's own filesystems (file, s3, gs, hdfs), else through fsspec (memory, ...)."""
    try:
        fs, base = pafs.FileSystem.from_uri(url)
        return Location(fs, base.rstrip("/"))
    except pa.ArrowInvalid as arrow_err:  # a scheme pyarrow does not know: try fsspec
        reason = str(arrow_err)
    try:
        import fsspec

        fs, base = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as err:
        raise UserError(f"cannot open {url!r}: neither pyarrow ({reason}) nor fsspec ({err}) knows its scheme; "
                        "install the fsspec package for that storage (e.g. s3fs, gcsfs) or pass a local path") from None
    return Location(pafs.PyFileSystem(pafs.FSSpecHandler(fs)), base.rstrip("/"))
