"""CLI start-up: wall and CPU time of ``ad --help`` and ``ad <command> --help``, each in a fresh process (median of
several runs), against the same command in a process that first does the heavy imports eagerly.

The reference is what the CLI paid before #20: listing commands imported every plugin module, and one of them
(the DarkRoom evaluation env, through ``ad.evaluate``) imported torch, so the default reference is
``import torch`` + the same command. ``--eager "import torch, lightning"`` measures a CLI that would also load
Lightning up front (5-7 s here).

    python benchmarks/cli_help.py            # every registered command, 7 runs each (~3 min)
    python benchmarks/cli_help.py --quick    # ad --help and ad generate darkroom --help, 3 runs each (~20 s)

Figures: wall time and CPU time (user + sys, steadier when other processes share the cores) of each command.
Goal: every ``--help`` under 0.5 s. Runs are interleaved (ours, reference, ours, ...) so that load from other
processes hits both alike.
"""
from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.common import figure, parse_args, report  # noqa: E402

GOAL_S = 0.5
QUICK = (["--help"], ["generate", "darkroom", "--help"])
EAGER = "import torch"  # the reference: the heavy import the CLI did up front before #20


def ad_command() -> list[str]:
    """The installed ``ad`` console script (what users run), else ``python -m ad``."""
    script = Path(sys.executable).parent / "ad"
    if script.is_file():
        return [str(script)]
    found = shutil.which("ad")
    return [found] if found else [sys.executable, "-m", "ad"]


def all_help_argvs() -> list[list[str]]:
    import ad.commands

    ad.commands.load()  # registers inspect / eval / demo
    from ad import registry

    argvs = [["--help"]]
    for cmd in registry.all_commands():
        argvs.append([cmd.name, "--help"] if cmd.group == "ad" else [cmd.group, cmd.name, "--help"])
    return argvs


def timed_run(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + sys) of one fresh process running ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(argv: list[str], runs: int, eager: str) -> dict[str, tuple[float, float]]:
    """{"wall"|"cpu": (median seconds of ``ad <argv>``, median seconds of the same after ``eager``)}."""
    ours_cmd = [*ad_command(), *argv]
    ref_cmd = [sys.executable, "-c", f"{eager}; from ad.cli import main; main({argv!r})"]
    timed_run(ours_cmd), timed_run(ref_cmd)  # warm the file cache once
    ours, ref = [], []
    for _ in range(runs):
        ours.append(timed_run(ours_cmd))
        ref.append(timed_run(ref_cmd))
    return {kind: (statistics.median(o[i] for o in ours), statistics.median(r[i] for r in ref))
            for i, kind in enumerate(("wall", "cpu"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 commands x 3 runs instead of all x 7")
    parser.add_argument("--runs", type=int, default=None, help="runs per command (median taken)")
    parser.add_argument("--eager", default=EAGER, help="the reference's up-front imports (Python statement)")
    args = parse_args(parser)
    runs = args.runs or (3 if args.quick else 7)
    argvs = [list(a) for a in QUICK] if args.quick else all_help_argvs()
    figures = []
    for argv in argvs:
        times = measure(argv, runs, args.eager)
        command = f"ad {' '.join(argv)}"
        (wall, wall_ref), (cpu, cpu_ref) = times["wall"], times["cpu"]
        print(f"{command}: {wall:.3f} s wall, {cpu:.3f} s CPU (after `{args.eager}`: {wall_ref:.3f} s, "
              f"{cpu_ref:.3f} s)", flush=True)
        figures.append(figure(f"`{command}` wall time, fresh process (median of {runs}) vs the same after "
                              f"`{args.eager}`", "s", wall, wall_ref, f"ours < {GOAL_S} s", higher_is_better=False))
        figures.append(figure(f"`{command}` CPU time (user + sys; steadier than wall on a shared machine) vs the "
                              f"same after `{args.eager}`", "s", cpu, cpu_ref, f"ours < {GOAL_S} s",
                              higher_is_better=False))
    report("cli_help", figures, args.quick, page="usability")
    slow = [f["figure"] for f in figures if f["ours"] >= GOAL_S]
    if slow:
        print(f"over the {GOAL_S} s goal: {len(slow)} figure(s); the wall times suffer most from other load")


if __name__ == "__main__":
    main()
