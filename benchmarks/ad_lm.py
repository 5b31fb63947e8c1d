"""Algorithm Distillation in the Language format vs the RL format on DarkRoom, over several seeds (held-out splits).

For each seed, `ad demo --model lm --seed S --out <root>/seed<S>` (skipped where its results exist: the demo
resumes and reuses finished stages) gives, on the same held-out goals x 3 evaluation seeds: the RL-format AD and
ED, the LM trained from scratch (AD) and on expert episodes only (ED), random and the source (the explorer by
default). Figures: return / optimal at episodes 1-5, 36-40 and 91-100 of each model per seed and their mean; the
LM's episodes 36-40 figure has the RL-format AD's as its reference. Plot: ``benchmarks/results/ad_lm.png`` (mean
over seeds).

    python -m benchmarks.ad_lm --root data/ad_lm --seeds 0 1          # runs what is missing (~30 min a seed)
    python -m benchmarks.ad_lm --root data/ad_lm --seeds 0 1 --quick  # only reads finished runs (seconds)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, parse_args, report  # noqa: E402

#: report label -> short name in the figures
MODELS = {"AD": "RL-format AD", "ED (RL format)": "RL-format ED", "LM AD (Llama from scratch)": "LM from scratch",
          "LM ED (from scratch)": "LM ED (expert-only, from scratch)",
          "LM AD (SmolLM2-135M + LoRA)": "SmolLM2-135M + LoRA", "random": "random", "source": "source"}
WINDOWS = {"episodes 1-5": slice(0, 5), "episodes 36-40": slice(35, 40), "episodes 91-100": slice(90, 100)}


def seed_results(folder: Path) -> dict[str, np.ndarray]:
    """Report label -> normalised curve (episodes,) from a demo folder's RL and LM eval.json files."""
    from models.lm.demo import combined_summary

    rl = folder / "eval" / "eval.json"
    lms = {p.parent.name: json.loads(p.read_text()) for p in sorted((folder / "eval-lm").glob("*/eval.json"))}
    summary = combined_summary(json.loads(rl.read_text()) if rl.is_file() else None, lms)
    return {name: np.asarray(row["normalised"]) for name, row in summary["policies"].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default="data/ad_lm", help="folder of the per-seed demo folders seed<S>/")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="demo seeds (held-out splits)")
    parser.add_argument("--quick", action="store_true", help="only read finished runs, run nothing")
    parser.add_argument("--demo-args", nargs=argparse.REMAINDER, default=[],
                        help="extra `ad demo --model lm` options (after everything else)")
    parser.add_argument("--name", default="ad_lm", help="results name: benchmarks/results/<name>.json and .png")
    args = parse_args(parser)
    root = Path(args.root)
    per_seed: dict[int, dict[str, np.ndarray]] = {}
    for seed in args.seeds:
        folder = root / f"seed{seed}"
        if not args.quick and not (folder / "report-lm.md").is_file():
            subprocess.run(["ad", "demo", "--model", "lm", "--seed", str(seed), "--out", str(folder),
                            *args.demo_args], check=True)
        if (folder / "eval-lm").is_dir():
            per_seed[seed] = seed_results(folder)
    if not per_seed:
        raise SystemExit(f"no finished runs under {root} for seeds {args.seeds}")
    seeds = sorted(per_seed)
    figures = []
    names = [n for n in MODELS if any(n in per_seed[s] for s in seeds)]
    table = {}  # (name, window) -> {seed: value} over the seeds that have the model
    for name in names:
        for window, part in WINDOWS.items():  # a curve shorter than the window (the explorer's 60 episodes) has none
            table[(name, window)] = {s: float(per_seed[s][name][part].mean()) for s in seeds
                                     if name in per_seed[s] and len(per_seed[s][name]) >= part.stop}
    lm, rl = "LM AD (Llama from scratch)", "AD"
    for name in names:
        for window in WINDOWS:
            values = table[(name, window)]
            if not values:
                continue
            reference = None
            if name == lm and rl in names:
                reference = float(np.mean(list(table[(rl, window)].values())))
            label = "LM from scratch (Language format)" if name == lm else MODELS[name]
            goal = ">= 0.8 (RL-format AD: the reference)" if name == lm and window == "episodes 36-40" else "-"
            fig = figure(f"{label}, held-out return / optimal, {window} (seeds "
                         f"{', '.join(f'{s}: {v:.2f}' for s, v in values.items())})", "return / optimal",
                         float(np.mean(list(values.values()))), reference, goal)
            fig["per_seed"] = {str(s): v for s, v in values.items()}
            if reference is not None:
                fig["reference_seeds"] = sorted(table[(rl, window)])
            figures.append(fig)
    plot(per_seed, seeds, names, RESULTS / f"{args.name}.png")
    # --quick runs nothing but reads the same finished runs: the figures are the full ones
    report(args.name, figures, quick=False, page="language-format")


def plot(per_seed: dict[int, dict[str, np.ndarray]], seeds: list[int], names: list[str], path: Path) -> Path:
    """Mean over seeds of each model's normalised in-context curve, saved at ``path``."""
    from models.lm.demo import plot_curves

    curves = {}
    for name in names:
        stacked = np.stack([per_seed[s][name] for s in seeds if name in per_seed[s]])  # (seeds with it, episodes)
        curves[name] = (stacked.mean(0), stacked.std(0))
    return plot_curves(curves, 1.0, path,
                       title=f"Held-out DarkRoom goals, mean over seeds {seeds}: RL vs Language format")


if __name__ == "__main__":
    main()
