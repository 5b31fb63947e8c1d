"""Our option parser (ad.config) against jsonargparse (what Lightning's CLI is built on), on our own commands.

Issue #20 asked to move the CLI onto jsonargparse or tyro unless a measured comparison says ours serves users
better. Both parsers read the same config dataclasses; for every registered command this measures:

- seconds to build the parser and parse one command line (median of 5), ours vs jsonargparse;
- behaviours a user meets, each checked by running both parsers (1 = behaves as asked, 0 = not):
  the option's help text in --help, Literal choices in --help, `--no-<flag>`, `--kebab-case` flags,
  a NaN refused, `size: nine` in a config file refused with the option named, a one-line error (no usage dump).

    python benchmarks/cli_config.py [--quick]     (needs `pip install jsonargparse`; --quick: 3 commands)
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import statistics
import sys
import tempfile
import time
import typing
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402

import ad.commands  # noqa: E402

ad.commands.load()  # registers inspect / eval / demo / export / import
from ad import cli, registry  # noqa: E402
from ad.config import _base_type, parse_config  # noqa: E402


def _run(fn: Callable[[], Any]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a parser call; 0 when it returns."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            fn()
            code = 0
        except SystemExit as exit_info:
            code = int(exit_info.code or 0)
        except Exception as error:  # noqa: BLE001 -- ours raises UserError, which the CLI prints as one line
            print(f"error: {error}", file=sys.stderr)
            code = 2
    return code, out.getvalue(), err.getvalue()


class Ours:
    name = "ad.config"

    def __init__(self, cls: type, prog: str):
        self.cls, self.prog = cls, prog

    def parse(self, argv: list[str]) -> Any:
        return parse_config(self.cls, argv, prog=self.prog)

    def flag(self, field: str) -> str:
        return "--" + field.replace("_", "-")


class JsonArgParse:
    name = "jsonargparse"

    def __init__(self, cls: type, prog: str):
        from jsonargparse import ArgumentParser

        self.cls = cls
        self.parser = ArgumentParser(prog=prog, exit_on_error=True)
        self.parser.add_class_arguments(cls, as_group=False)
        self.parser.add_argument("--config", action="config")

    def parse(self, argv: list[str]) -> Any:
        return self.parser.parse_args(argv)

    def flag(self, field: str) -> str:
        return "--" + field


def _fields(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: (_base_type(hints[f.name])[0], f) for f in dataclasses.fields(cls) if f.init}


def _one_line_error(stderr: str) -> bool:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return len(lines) == 1 and "error" in lines[0]


def behaviours(make: Callable[[], Any], cls: type) -> dict[str, int]:
    """Which asked-for behaviours a parser shows on one command (1/0 each)."""
    parser = make()
    fields = _fields(cls)
    _, help_text, _ = _run(lambda: parser.parse(["--help"]))
    flat_help = " ".join(help_text.split())
    helps = [f.metadata.get("help", "") for _, f in fields.values() if f.metadata.get("help")]
    literal = [(n, typing.get_args(t)) for n, (t, _) in fields.items() if typing.get_origin(t) is typing.Literal]
    floats = [n for n, (t, _) in fields.items() if t is float]
    bools = [n for n, (t, _) in fields.items() if t is bool]
    ints = [n for n, (t, _) in fields.items() if t is int]
    result = {"help text shown": int(all(" ".join(h.split())[:40] in flat_help for h in helps[:5]))}
    if literal:
        result["choices shown"] = int(all(all(str(c) in flat_help for c in choices) for _, choices in literal))
    if any("_" in n for n in fields):
        result["kebab-case flags"] = int(all(parser.flag(n) in help_text and "-" in parser.flag(n)[2:]
                                             for n in fields if "_" in n))
    if bools:
        name = next((b for b in bools if fields[b][1].default is True), None)
        if name is not None:
            parsed: list[Any] = []
            code, _, _ = _run(lambda: parsed.append(parser.parse(["--no-" + name.replace("_", "-")])))
            result["--no-flag"] = int(code == 0 and parsed and getattr(parsed[0], name) is False)
    if floats:
        code, _, err = _run(lambda: parser.parse([f"{parser.flag(floats[0])}=nan"]))
        result["NaN refused, one error line"] = int(code == 2 and _one_line_error(err))
    if ints:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
            fh.write(f"{ints[0]}: nine\n")
        code, _, err = _run(lambda: parser.parse(["--config", fh.name]))
        result["config-file type error names the option"] = int(code == 2 and ints[0].replace("_", "-")[:6] in err
                                                                 .replace("_", "-"))
        result["config-file error in one line"] = int(code == 2 and _one_line_error(err))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three commands instead of all")
    args = parse_args(parser)
    commands = [(f"ad {g + ' ' if g != 'ad' else ''}{n}", c.config_cls) for g in ("ad", *cli.GROUPS)
                for n, c in sorted(registry.commands(g).items())]
    if args.quick:
        commands = [c for c in commands if c[0] in ("ad generate darkroom", "ad train rl", "ad eval")]
    times = {"ours": [], "jsonargparse": []}
    scores = {"ours": {}, "jsonargparse": {}}
    for prog, cls in commands:
        for label, kind in (("ours", Ours), ("jsonargparse", JsonArgParse)):
            samples = []
            for _ in range(5):
                start = time.perf_counter()
                _run(lambda: kind(cls, prog).parse([]))
                samples.append(time.perf_counter() - start)
            times[label].append(statistics.median(samples))
            for name, ok in behaviours(lambda: kind(cls, prog), cls).items():
                scores[label].setdefault(name, []).append(ok)
        print(f"{prog}: ours {times['ours'][-1] * 1e3:.1f} ms, jsonargparse {times['jsonargparse'][-1] * 1e3:.1f} ms")
    figures = [figure("build the parser + parse one command line (median per command, mean over commands)", "ms",
                      1e3 * statistics.mean(times["ours"]), 1e3 * statistics.mean(times["jsonargparse"]),
                      "no slower", higher_is_better=False)]
    for name in scores["ours"]:
        applicable = len(scores["ours"][name])  # commands that have such an option
        figures.append(figure(f"commands where: {name} (of {applicable} with such an option)", "commands",
                              sum(scores["ours"][name]), sum(scores["jsonargparse"].get(name, [0])),
                              f"all {applicable}"))
    report("cli_config", figures, args.quick, page="usability")


if __name__ == "__main__":
    main()
