"""The `ad` command line: ``ad <group> [<name>] [--options]``.

Groups with a name (``generate``, ``train``) look the name up in
:mod:`ad.registry`; single commands (``inspect``, ``eval``, ``demo``) are
registered under the group "ad". User errors exit with code 2 and one message.
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

from ad import registry
from ad.config import parse_config
from ad.errors import USER_ERRNOS, USER_OS_ERRORS, UserError, describe_os_error, is_storage_error

GROUPS = ("generate", "train", "export", "import")


def _usage() -> str:
    lines = ["usage: ad <command> [options]", "", "commands:"]
    for group in ("ad", *GROUPS):  # the core's own commands first, then each group's
        for name, cmd in sorted(registry.commands(group).items()):
            lines.append(f"  {name if group == 'ad' else group + ' ' + name:<22} {cmd.help}")
    return "\n".join([*lines, "", "`ad <command> --help` lists a command's options."])


def run(argv: Sequence[str]) -> int:
    """Dispatch one command; returns the process exit code."""
    argv = list(argv)
    from ad import commands

    listing = not argv or argv[0] in ("-h", "--help") or (argv[0] in GROUPS and (len(argv) < 2 or argv[1][:1] == "-"))
    commands.load(None if listing else tuple(argv[:2]))
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    head, rest = argv[0], argv[1:]
    selectors = None
    if head in GROUPS:
        if not rest or rest[0].startswith("-"):
            names = ", ".join(sorted(registry.commands(head))) or "none"
            print(f"usage: ad {head} <name> [options]   (names: {names})", file=sys.stderr)
            return 2
        cmd = registry.get(head, rest[0])
        prog, rest, description = f"ad {head} {rest[0]}", rest[1:], cmd.help
    elif head == "demo":
        from ad.commands.demo import select_demo

        cmd, rest, selectors = select_demo(rest)
        prog, description = "ad demo", ""  # the demo config class's docstring
    else:
        cmd = registry.get("ad", head)
        prog, description = f"ad {head}", cmd.help
    config = parse_config(cmd.config_cls, rest, prog=prog, description=description, selectors=selectors)
    result = cmd.run(config)
    return int(result) if isinstance(result, int) else 0


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        code = run(sys.argv[1:] if argv is None else argv)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        code = 2
    except BrokenPipeError:  # the reader of our output went away (`ad --help | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    except OSError as err:  # the machine refused a file operation: full disk, read-only or missing folder ...
        if not isinstance(err, USER_OS_ERRORS) and getattr(err, "errno", None) not in USER_ERRNOS \
                and not is_storage_error(err):  # a remote store out of reach: one line too
            raise
        print(f"error: {describe_os_error(err)}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt as err:  # a command may say how to go on (training: --resume)
        print(f"interrupted; {err.args[0] if err.args else 're-run the same command to resume'}", file=sys.stderr)
        code = 130
    sys.exit(code)
