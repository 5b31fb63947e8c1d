"""Running ``ad`` in-process in a test: the exit code and output, with a failure checked to be one error line."""
from __future__ import annotations

import pytest

from ad import cli

#: stderr lines that may stand beside an error line: argparse's usage, indented continuations, repair notes
_NOTES = ("usage:", " ", "repairing ")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit code, stderr, stdout) of ``ad argv``; asserts a failure is one ``error:`` line (never a traceback) and an
    interrupt one ``interrupted;`` line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    code = exit_info.value.code
    if code == 130:
        assert err.strip().startswith("interrupted;"), err
    elif code:
        assert "Traceback" not in err, err
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith(_NOTES)]
        assert len(lines) == 1 and lines[0].startswith("error:"), err
    return code, err, out


def script_error(capsys, monkeypatch, main, script: str, *argv: str) -> str:
    """The one ``error:`` line with which a benchmark script's ``main`` (run as ``script argv``) ends, with exit code
    2 (asserted)."""
    import sys

    monkeypatch.setattr(sys, "argv", [script, *argv])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    return err[0]
