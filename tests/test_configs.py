"""Every file under configs/ is what its command prints with --print-config (so --config reads it back exactly),
its first line is that one command, and every headline figure's config exists."""
from __future__ import annotations

import contextlib
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))
sys.path.insert(0, str(ROOT))
from benchmarks import make_table  # noqa: E402


def command_of(path: Path) -> list[str]:
    """The command on a config's first line (``# <command> --config <path>``)."""
    first = path.read_text().splitlines()[0]
    assert first.startswith("# "), f"{path}: the first line must be '# <the command>'"
    return shlex.split(first[2:])


def printed_options(command: list[str]) -> dict:
    """What ``command --print-config`` prints, parsed: in-process for `ad`, a subprocess for a benchmark script."""
    if command[0] == "ad":
        from ad import cli

        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
            cli.main([*command[1:], "--print-config"])
        assert done.value.code == 0
        return yaml.safe_load(out.getvalue())
    assert command[0] == "python" and command[1].startswith("benchmarks/"), command
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, *command[1:], "--print-config"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return yaml.safe_load(run.stdout)


def test_there_are_configs():
    assert len(CONFIGS) >= 20


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT / "configs")))
def test_config_round_trips_through_its_command(path, monkeypatch):
    monkeypatch.chdir(ROOT)  # commands and the paths inside configs are relative to the repository root
    command = command_of(path)
    at = command.index("--config")
    assert command[at + 1] == str(path.relative_to(ROOT)), "the first line must name this very file"
    assert printed_options(command) == yaml.safe_load(path.read_text())


def test_every_headline_figure_has_its_config():
    heads = [f for f in make_table.load() if f.get("headline")]
    assert heads
    for fig in heads:
        config = fig["config"]
        assert config and config.startswith("configs/") and (ROOT / config).is_file(), fig["figure"]
        assert f"--config {config}" in (ROOT / config).read_text().splitlines()[0]
