"""LunarLander: AD vs ED in context on held-out tasks, over several seeds (held-out splits), for one task distribution.

For each seed, `ad demo --task lunarlander --config <demo config> --seed S --out <root>/seed<S>` (skipped where its
evaluation exists) gives the batched-PPO histories, AD and ED, and their returns on the held-out tasks beside the
source's own first episodes and random. Figures per seed and their mean: each row's return over episodes 1-5 and
6-10, and AD's lead over ED at episodes 6-10 (goal: above 0, the issue's "AD above ED"). Several task distributions
(``--variant``: the default gravity / wind tasks, tasks with swapped engines ...) sit side by side in
``benchmarks/results/lunarlander_ad.json``; plot ``benchmarks/results/lunarlander_ad_<variant>.png``.

    python benchmarks/lunarlander_ad.py --config configs/lunarlander/ad_swapped.yaml          # runs what is missing
    python benchmarks/lunarlander_ad.py --config configs/lunarlander/ad_swapped.yaml --quick  # reads finished runs
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ad.demo import eval_folder_name  # noqa: E402
from benchmarks.common import RESULTS, demo_wall_time_figures, figure, merge_report, parse_args  # noqa: E402
from benchmarks.lunarlander_common import plot_returns  # noqa: E402

WINDOWS = {"episodes 1-5": slice(0, 5), "episodes 6-10": slice(5, 10)}
ROWS = {"AD": "AD", "DPT": "DPT", "ED": "ED", "source": "source (its first episodes)", "random": "random"}
CAPABILITY = "LunarLander: AD vs ED in context on held-out tasks"
#: Gymnasium's "solved" return
SOLVED = 200.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default="data/bench-lunarlander-ad", help="folder of the per-seed demo folders")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="demo seeds (held-out splits)")
    parser.add_argument("--demo-config", default="configs/lunarlander/demo.yaml",
                        help="`ad demo --task lunarlander` config: the task distribution, source, AD / ED, evaluation")
    parser.add_argument("--variant", default="gravity-wind", help="name of this task distribution in the results")
    parser.add_argument("--headline", action="store_true", help="this variant's AD - ED figure is the headline")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="sampling temperature of the evaluation (`ad demo --temperature`; the trained models and "
                             "histories of the same --root are reused)")
    parser.add_argument("--timed", action="store_true",
                        help="also record each seed's whole demo wall time (its timings.json) against the 30-minute "
                             "goal: for a run made alone on the machine")
    parser.add_argument("--quick", action="store_true", help="only read finished runs, run nothing")
    args = parse_args(parser)
    root = Path(args.root)
    curves: dict[int, dict[str, np.ndarray]] = {}
    for seed in args.seeds:
        folder = root / f"seed{seed}"
        path = folder / eval_folder_name(args.temperature) / "eval.json"
        if not args.quick and not path.is_file():
            subprocess.run([sys.executable, "-m", "ad", "demo", "--task", "lunarlander", "--config", args.demo_config,
                            "--seed", str(seed), "--out", str(folder), "--temperature", str(args.temperature)],
                           check=True)
        if path.is_file():
            policies = json.loads(path.read_text())["policies"]
            curves[seed] = {label: np.asarray(policies[name]["mean"]) for name, label in ROWS.items()
                            if name in policies}
    if not curves:
        raise SystemExit(f"no finished runs under {root} for seeds {args.seeds}")
    seeds = sorted(curves)
    figures = []
    for label in ROWS.values():
        for window, part in WINDOWS.items():
            values = {s: float(curves[s][label][part].mean()) for s in seeds if label in curves[s]}
            if not values:  # a method this variant's demo did not train (DPT)
                continue
            fig = figure(f"{args.variant}: {label}, held-out return, {window} (seeds "
                         f"{', '.join(f'{s}: {v:.0f}' for s, v in values.items())})", "return",
                         float(np.mean(list(values.values()))), None, "-")
            fig["per_seed"] = {str(s): v for s, v in values.items()}
            figures.append(fig)
    lead = {s: float(curves[s]["AD"][5:10].mean() - curves[s]["ED"][5:10].mean()) for s in seeds}
    fig = figure(f"{args.variant}: AD's lead over ED, held-out return at episodes 6-10 (seeds "
                 f"{', '.join(f'{s}: {v:+.0f}' for s, v in lead.items())}; every seed must be above 0)", "return",
                 float(min(lead.values())), None, "> 0 (the lowest seed's)")
    fig["per_seed"] = {str(s): v for s, v in lead.items()}
    if args.headline:
        fig.update(headline=True, short=f"LunarLander ({args.variant}): AD above ED on held-out tasks (the lowest "
                                        "seed's lead)")
    figures.append(fig)
    figures.append(solved_figure(args.variant, curves, seeds))
    if args.timed and args.temperature == 1.0:  # at another temperature the demo only evaluated again
        figures += demo_wall_time_figures([root / f"seed{s}" for s in seeds], seeds, "ad demo --task lunarlander",
                                          args.variant)
    plot_returns(curves, seeds, RESULTS / f"lunarlander_ad_{args.variant}.png",
                 f"LunarLander ({args.variant}), held-out tasks, mean of seeds {seeds}")
    # --quick runs nothing but reads the same finished runs: the figures are the full ones
    merge_report("lunarlander_ad", False, args.variant, figures, capability=CAPABILITY, page="continuous")


def solved_figure(variant: str, curves: dict[int, dict[str, np.ndarray]], seeds: list[int]) -> dict:
    """The first in-context episode at which AD's mean held-out return passes the solved return (200), per seed and
    their mean; a seed that never does counts as its episodes + 1."""
    reached = {s: next((i + 1 for i, v in enumerate(curves[s]["AD"]) if v >= SOLVED), None) for s in seeds}
    shown = [r if r is not None else len(curves[s]["AD"]) + 1 for s, r in reached.items()]
    text = ", ".join(f"{s}: {r if r is not None else 'never in ' + str(len(curves[s]['AD']))}"
                     for s, r in reached.items())
    fig = figure(f"{variant}: first in-context episode at which AD's mean held-out return passes {SOLVED:.0f} (seeds "
                 f"{text}; never = episodes + 1)", "episode", float(np.mean(shown)), None, "-", higher_is_better=False)
    fig["per_seed"] = {str(s): r for s, r in reached.items()}
    return fig


if __name__ == "__main__":
    main()
