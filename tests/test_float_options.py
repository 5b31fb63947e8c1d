"""Property test (issue #19): every float option of every command refuses NaN and +-inf, and 0 or a negative
value is either a valid setting or refused, always with exit 2, one ``error:`` line naming the option and
nothing written.

The commands are enumerated from the registry, so a new command or option is covered without editing this file.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import tempfile
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ad import cli, registry
from ad.config import _base_type


def _float_options() -> list[tuple[list[str], str]]:
    """(command words, option name) for every float-typed option of every registered command."""
    found = []
    for group in ("ad", *cli.GROUPS):
        for name, command in sorted(registry.commands(group).items()):
            words = [name] if group == "ad" else [group, name]
            hints = typing.get_type_hints(command.config_cls)
            for field in dataclasses.fields(command.config_cls):
                base, _ = _base_type(hints[field.name])
                inner = typing.get_args(base)[0] if typing.get_origin(base) in (list, tuple) else base
                if inner is float:
                    found.append((words, field.name))
    return found


FLOAT_OPTIONS = _float_options()


def _run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli.main(argv)
        except SystemExit as exit_info:
            return int(exit_info.code or 0), err.getvalue()
    return 0, err.getvalue()


def test_every_command_with_float_options_is_covered():
    commands = {" ".join(words) for words, _ in FLOAT_OPTIONS}
    assert {"generate darkroom", "train rl", "train lm", "generate rlhf", "generate gridworld"} <= commands
    assert len(FLOAT_OPTIONS) >= 30


@settings(max_examples=250, deadline=None)
@given(option=st.sampled_from(FLOAT_OPTIONS),
       value=st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0]),
                       st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=False)))
def test_float_options_refuse_non_finite_values_and_write_nothing(option, value):
    words, name = option
    flag = "--" + name.replace("_", "-")
    with tempfile.TemporaryDirectory() as work:
        cwd = os.getcwd()
        os.chdir(work)
        try:
            # --print-config: a value that passes every check is printed, nothing runs
            code, err = _run([*words, f"{flag}={value!r}", "--print-config"])
            if not math.isfinite(value):
                assert code == 2, (words, flag, value, err)
            assert code in (0, 2), err
            if code == 2:
                lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
                assert len(lines) == 1 and "error:" in lines[0] and flag in lines[0], err
                assert "Traceback" not in err
                # and without --print-config the command stops before writing anything
                assert _run([*words, f"{flag}={value!r}"])[0] == 2
            assert os.listdir(work) == [], os.listdir(work)
        finally:
            os.chdir(cwd)


@pytest.mark.parametrize("option", FLOAT_OPTIONS, ids=lambda o: " ".join(o[0]) + " " + o[1] if isinstance(o, tuple)
                         else str(o))
def test_each_float_option_refuses_nan(option):
    words, name = option
    flag = "--" + name.replace("_", "-")
    code, err = _run([*words, f"{flag}=nan", "--print-config"])
    assert code == 2 and flag in err and "finite" in err
