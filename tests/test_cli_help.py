"""`ad --help` and `ad <command> --help`: every registered command prints all its options, and listing or
describing commands imports no heavy package (torch, lightning, transformers, trl, pyarrow): they load only when a
command runs. Plugins are found through the ``ad.plugins`` entry points, also from another distribution."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ad.commands  # noqa: E402

ad.commands.load()  # registers inspect / eval / demo / export / import
from ad import registry
from ad.cli import run

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "lightning", "transformers", "trl", "peft", "pyarrow")
COMMANDS = registry.all_commands()


def argv_of(cmd: registry.Command) -> list[str]:
    return [cmd.name] if cmd.group == "ad" else [cmd.group, cmd.name]


def test_the_registry_finds_the_commands_of_every_family():
    found = {(cmd.group, cmd.name) for cmd in COMMANDS}
    assert {("generate", "darkroom"), ("train", "rl"), ("train", "lm"), ("ad", "eval"), ("ad", "demo")} <= found


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda cmd: " ".join(argv_of(cmd)))
def test_help_of_every_command_exits_0_and_lists_every_option(cmd, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run([*argv_of(cmd), "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: ad {' '.join(argv_of(cmd))}")
    for field in dataclasses.fields(cmd.config_cls):
        if field.init:
            assert "--" + field.name.replace("_", "-") in text, f"--help of {argv_of(cmd)} misses {field.name}"


def test_top_level_help_lists_every_command(capsys):
    assert run(["--help"]) == 0
    text = capsys.readouterr().out
    for cmd in COMMANDS:
        assert " ".join(argv_of(cmd)) in text


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_help_imports_no_heavy_package():
    """Correctness, not timing: ``ad --help`` and every ``ad <command> --help`` leave torch & co. unimported."""
    argvs = [["--help"]] + [[*argv_of(cmd), "--help"] for cmd in COMMANDS]
    proc = _python(f"""
        import contextlib, io, json, sys
        from ad.cli import run
        for argv in {argvs!r}:
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    run(argv)
                except SystemExit as err:
                    assert err.code == 0, (argv, err.code)
        print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
        """)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_plugins_come_from_entry_points_of_any_distribution(tmp_path):
    """A family in another package declares ``[project.entry-points."ad.plugins"]``; a stale entry point whose module
    is gone is skipped with a warning instead of breaking every command."""
    (tmp_path / "fake_family.py").write_text(textwrap.dedent("""
        from dataclasses import dataclass

        from ad.config import option
        from ad.registry import register


        @dataclass
        class FakeConfig:
            \"\"\"A family that lives outside this repository.\"\"\"

            rooms: int = option(2, "how many rooms")


        register("generate", "fake", FakeConfig, lambda config: print("rooms", config.rooms), help="a fake family")
        """))
    dist = tmp_path / "fake_family-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-family\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ad.plugins]\nfake = fake_family\ngone = no_such_module_abc\n")
    code = """
        from ad.cli import run
        run(["--help"])
        run(["generate", "fake", "--rooms", "5"])
        """
    proc = _python(code, PYTHONPATH=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "generate fake" in proc.stdout and "generate darkroom" in proc.stdout and "train rl" in proc.stdout
    assert "rooms 5" in proc.stdout
    assert "skipping ad plugin 'gone'" in proc.stderr


DTYPE_COMMANDS = [cmd for cmd in COMMANDS if any(f.name == "dtype" for f in dataclasses.fields(cmd.config_cls))]


def test_the_weights_dtype_option_is_declared_once_and_shared():
    from ad.config.groups import WeightsDtypeOptions

    names = {" ".join(argv_of(cmd)) for cmd in DTYPE_COMMANDS}
    assert {"train lm", "generate gridworld", "generate textworld"} <= names
    shared = dataclasses.fields(WeightsDtypeOptions)[0]
    for cmd in DTYPE_COMMANDS:
        assert issubclass(cmd.config_cls, WeightsDtypeOptions), cmd.name
        field = next(f for f in dataclasses.fields(cmd.config_cls) if f.name == "dtype")
        assert field.metadata["help"] == shared.metadata["help"] and field.default == shared.default, cmd.name


@pytest.mark.parametrize("cmd", DTYPE_COMMANDS, ids=lambda cmd: " ".join(argv_of(cmd)))
def test_every_dtype_option_refuses_float16_with_exit_2(cmd, tmp_path, capsys):
    from ad.errors import UserError
    from ad.config.groups import WEIGHT_DTYPES

    with pytest.raises(SystemExit) as exit_info:
        run([*argv_of(cmd), "--dtype", "float16", "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "float16" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError, match="--dtype must be one of " + ", ".join(WEIGHT_DTYPES)):
        cmd.config_cls(dtype="float16")
