"""User-facing errors.

Anything a user can fix (a bad path, a wrong column type, an unknown preset) is
raised as :class:`UserError`. The CLI prints its message without a traceback and
exits with code 2. Programming errors stay ordinary exceptions.
"""
from __future__ import annotations

import errno
import re


class UserError(Exception):
    """An error caused by user input, with a message that says what to do."""


class SchemaError(UserError):
    """A history file does not match the learning-history schema."""


#: OS errors a user fixes (permissions, a full disk, a path that is a file): reported in one line, exit 2.
USER_OS_ERRORS = (PermissionError, FileExistsError, IsADirectoryError, NotADirectoryError)
USER_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR,
               errno.EEXIST, errno.EMFILE, errno.ENAMETOOLONG}
_ADVICE = {errno.ENOSPC: "free some disk space or choose another --out, then re-run the same command to resume",
           errno.EDQUOT: "free some space in your quota or choose another --out, then re-run to resume",
           errno.EROFS: "the file system is read-only: choose another --out",
           errno.EACCES: "you may not write there: choose another --out or fix the folder's permissions",
           errno.EPERM: "you may not write there: choose another --out or fix the folder's permissions"}


#: Words of the messages pyarrow's remote filesystems (S3, GCS, HDFS) give when the store cannot be reached or
#: refuses the request (no network, an unknown host or bucket, missing credentials).
_STORAGE_WORDS = ("AWS Error", "curlCode", "Could not resolve host", "Could not connect", "google::cloud", "GCS",
                  "HdfsConnect", "NoSuchBucket", "ACCESS_DENIED", "When resolving region")


def is_storage_error(err: BaseException) -> bool:
    """Whether ``err`` says a remote store (``s3://``, ``gs://`` ...) could not be reached or refused access."""
    return isinstance(err, OSError) and any(word in str(err) for word in _STORAGE_WORDS)


def describe_os_error(err: OSError) -> str:
    """One line: what the OS refused, on which path, and what to do (pyarrow's messages included)."""
    code = getattr(err, "errno", None)
    if code is None:  # pyarrow puts "[errno N] ..." into the message instead
        found = re.search(r"errno (\d+)", str(err), re.IGNORECASE)
        code = int(found.group(1)) if found else None
    where = f" ({err.filename})" if getattr(err, "filename", None) else ""
    text = (err.strerror or str(err)) if getattr(err, "strerror", None) else str(err)
    advice = "check the URL, the network and your credentials, then re-run the same command" \
        if is_storage_error(err) else _ADVICE.get(code, "check the path and try again")
    return f"{text}{where}; {advice}".replace("\n", " ")
