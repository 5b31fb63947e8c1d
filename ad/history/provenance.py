"""Provenance recorded in every dataset: package versions, git commit, creation time."""
from __future__ import annotations

import contextlib
import datetime as _dt
import subprocess
from importlib import metadata as _metadata
from pathlib import Path

_PACKAGES = ("algorithm-distillation", "torch", "numpy", "pyarrow", "gymnasium", "transformers", "datasets",
             "trl", "peft", "lightning")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape a dataset."""
    versions = {}
    for name in _PACKAGES:
        with contextlib.suppress(_metadata.PackageNotFoundError):
            versions[name] = _metadata.version(name)
    return versions


def git_commit() -> str | None:
    """The commit of the source checkout, or None outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def cpu_capability() -> str | None:
    """The SIMD level torch's CPU kernels use here (e.g. ``AVX512``): floating-point results of the same
    computation may differ between levels, so a dataset resumed on another CPU type can differ in its last bits."""
    import sys

    torch = sys.modules.get("torch")  # only where the generator already imported it (no import cost here)
    try:
        return str(torch.backends.cpu.get_cpu_capability()) if torch is not None else None
    except (AttributeError, RuntimeError):
        return None


def provenance() -> dict[str, object]:
    return {"versions": package_versions(), "git_commit": git_commit(), "created": now_iso(),
            "cpu_capability": cpu_capability()}
