"""Held-out accuracy of the math task's ``cpu`` preset (the batched engine, ``ad generate math --preset cpu``):
greedy accuracy on 200 held-out problems before -> after training, seeds 0 and 1, with the reference refreshed
every k = 10 iterations and without refresh, plus each run's training time (goal: <= 60 minutes on 2 cores).

    python benchmarks/math_heldout.py --config configs/math/heldout_cpu.yaml   # the figure (hours: a quiet machine)
    python benchmarks/math_heldout.py --quick                                  # tiny random LM, checks the pipeline

It is :mod:`benchmarks.math_reinforce` (same runs, evaluation and figure fields) with ``--option preset=cpu``
added and the figures written to ``benchmarks/results/math_heldout.json``, named as CPU-preset figures.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

_HERE = os.path.dirname(os.path.abspath(__file__))  # see benchmarks/math_reinforce.py: no shadowing of "math"
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import math_reinforce  # noqa: E402
from benchmarks.common import report  # noqa: E402

#: Longest training time of one run the figure accepts (seconds on 2 cores).
RUN_LIMIT = 3600


def main() -> None:
    run = math_reinforce.run

    def cpu_run(args):
        if not any(o.split("=", 1)[0] == "preset" for o in args.option):
            args.option = ["preset=cpu", *args.option]
        args.overhead_steps = 0
        figures = run(args)
        for fig in figures:
            fig["figure"] = fig["figure"].replace("held-out accuracy", "CPU preset held-out accuracy", 1)
            fig["run_limit_s"] = RUN_LIMIT
            seconds = fig["train_seconds"]
            fig["within_run_limit"] = None if seconds != seconds else bool(seconds <= RUN_LIMIT)  # NaN: not trained
        return figures

    math_reinforce.run = cpu_run
    math_reinforce.report = lambda name, figures, quick, page: report(  # noqa: E731
        "math_heldout" if name == "math" else name, figures, quick=quick, page=page,
        capability="Math word problems with RLOO (ad generate math)")
    math_reinforce.main()


if __name__ == "__main__":
    main()
