"""Text files a user hands to a command (``--config``, ``--problems``, ``--prompts``): read as UTF-8, or refused
in one line naming the file and where the first byte that is not UTF-8 sits."""
from __future__ import annotations

from pathlib import Path

from ad.errors import UserError


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
