"""One writer per dataset (and per training run folder): a lock file that a second process writing the same local
folder finds taken."""
from __future__ import annotations

import os
from typing import Any

from ad.errors import UserError
from ad.history import layout
from ad.history.storage import Location


class DatasetLock:
    """An exclusive POSIX lock on ``<dataset>/.lock``, held while a process writes the dataset.

    The operating system releases it when the process ends (a kill -9 included), so a stale lock never
    blocks a resume. Remote datasets (s3://, gs://, memory://) are not locked: one writer at a time is
    then the user's to ensure.
    """

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path = fd, path

    @classmethod
    def acquire(cls, location: Location, advice: str = "") -> "DatasetLock | None":
        """Take the lock of a local dataset (None for a remote one); UserError if another process holds it.

        Training runs take the same lock on their run folder; ``advice`` replaces what the error tells the user
        to do once the other process is done (by default: re-run the same command to resume)."""
        base = location.local_path()
        if base is None:
            return None
        try:
            import fcntl
        except ImportError:  # Windows: no POSIX locks
            return None
        os.makedirs(base, exist_ok=True)
        path = os.path.join(base, layout.LOCK)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            advice = advice or "re-running the same command afterwards resumes"
            raise UserError(f"another process{f' (pid {holder})' if holder else ''} is writing {base}; wait for it "
                            f"to finish ({advice}), or choose another --out folder") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return cls(fd, path)

    def release(self) -> None:
        """Let another process take the lock."""
        if self.fd < 0:
            return
        try:
            os.close(self.fd)  # closing the file releases its POSIX lock
        finally:
            self.fd = -1

    def __del__(self) -> None:
        self.release()


def _read_pid(fd: int) -> Any:
    try:
        return os.pread(fd, 32, 0).decode().strip() or None
    except OSError:
        return None
