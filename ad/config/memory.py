"""Upper bounds checked before allocating: a command's memory estimate against this machine's memory.

A size option that would need more memory than the machine has (``--pulls 1000000000``, ``--n-embd 1000000``)
is refused in one line naming the option, instead of ending in the kernel's out-of-memory kill.
"""
from __future__ import annotations

import os

from ad.errors import UserError

#: Share of the machine's memory one command may plan to use.
MEMORY_SHARE = 0.6


def physical_memory_bytes() -> int:
    """RAM of this machine (or 64 GiB where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 64 << 30


def check_memory(need: float, what: str, advice: str) -> None:
    """UserError when ``need`` bytes exceed :data:`MEMORY_SHARE` of this machine's memory: ``"<what> needs about
    N GiB of memory, more than this machine can give (M GiB in all); <advice>"``."""
    total = physical_memory_bytes()
    if need > MEMORY_SHARE * total:
        raise UserError(f"{what} needs about {_gib(need)} of memory, more than this machine can give "
                        f"({_gib(total)} in all); {advice}")


def _gib(size: float) -> str:
    gib = size / 2**30
    return f"{gib:.1f} GiB" if gib < 1e5 else f"{gib:.1e} GiB"
