"""Helpers shared by the benchmark scripts: timing, the results table, the JSON record."""
from __future__ import annotations

import datetime as _dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

RESULTS = Path(__file__).parent / "results"


def lm_parser(description: str, quick_help: str) -> Any:
    """An argparse parser with the options every LM benchmark takes: ``--quick`` and ``--model``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--model", default="smollm2-135m", help="base LM (ad.pretrained.load_base name or folder)")
    return parser


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def figure(name: str, unit: str, ours: float, reference: float | None, goal: str, higher_is_better: bool = True
           ) -> dict[str, Any]:
    """One benchmark figure; ratio = ours / reference (None without a reference)."""
    ratio = None if reference in (None, 0) else ours / reference
    return {"figure": name, "unit": unit, "ours": ours, "reference": reference, "ratio": ratio, "goal": goal,
            "higher_is_better": higher_is_better}


def report(bench: str, figures: list[dict[str, Any]], quick: bool) -> Path:
    """Print the table and write benchmarks/results/<bench>.json."""
    script = Path(sys.argv[0])  # the benchmark that ran (one script may write several <bench>.json files)
    script_name = script.name if script.suffix == ".py" and script.parent.name == "benchmarks" else f"{bench}.py"
    command = "python " + " ".join([f"benchmarks/{script_name}", *sys.argv[1:]])
    date = _dt.date.today().isoformat()
    for fig in figures:
        fig.update(command=command, date=date)
    print(f"\n{bench} ({'quick' if quick else 'full'}; {platform.processor() or platform.machine()}, "
          f"{_cores()} cores)")
    print("| figure | unit | ours | reference | ratio | goal |\n|---|---|---|---|---|---|")
    for fig in figures:
        ref = "-" if fig["reference"] is None else f"{fig['reference']:,.3g}"
        ratio = "-" if fig["ratio"] is None else f"{fig['ratio']:.2f}x"
        print(f"| {fig['figure']} | {fig['unit']} | {fig['ours']:,.3g} | {ref} | {ratio} | {fig['goal']} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{bench}{'_quick' if quick else ''}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {out}")
    return out


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
