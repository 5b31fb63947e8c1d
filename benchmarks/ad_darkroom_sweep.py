"""DarkRoom AD robustness, the cheap way: the RL-format AD of `ad demo` (same generate and `ad train rl` options)
trained alone (no ED) on several room sizes x seeds, evaluated in context for 60 episodes x 3 seeds on the
held-out goals; prints and records AD's return / optimal at episodes 1-5, 36-40 and 51-60 and the share of
(goal, seed) runs that collapse (mean return below 10% of the optimum over episodes 41-60).

    python benchmarks/ad_darkroom_sweep.py --sizes 5 7 9 11 --seeds 0 1 2 [--work /tmp/ad-sweep] [-- extra train options]
    python benchmarks/ad_darkroom_sweep.py --quick          # 5x5, tiny histories and training (about a minute)
    python benchmarks/ad_darkroom_sweep.py --sizes 7 --seeds 0 --generate="--ent-coef 0.05"   # a source variant

Each (size, seed) is one `ad generate darkroom` + one `ad train rl` + one `ad eval` in fresh processes (`python -m
ad`, one thread each); finished steps are skipped on re-runs, and every finished run appends one line to
``<work>/results.jsonl``. Results: benchmarks/results/ad_darkroom_sweep.json (+ .png: one panel per option set).
``benchmarks/ad_darkroom.py`` runs the whole ``ad demo`` (with ED) instead.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, parse_args, report  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 7, 9, 11])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--work", default="data/bench-darkroom-sweep", help="datasets, runs and results.jsonl")
    parser.add_argument("--collect", action="store_true", help="only write the JSON from <work>/results.jsonl")
    parser.add_argument("--quick", action="store_true", help="a small version of the same work")
    parser.add_argument("--generate", default="", help="extra `ad generate darkroom` options in one string, e.g. "
                                                        "--generate='--ent-coef 0.05' (a source variant)")
    parser.add_argument("extra", nargs="*", help="extra `ad train rl` options after --, e.g. -- --subsample 80")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
from ad.config import make_config  # noqa: E402
from tasks.darkroom.demo import DarkRoomDemoConfig  # noqa: E402


QUICK_GENERATE = ["--steps-per-goal", "20000", "--no-terminate-on-goal", "--preset", "fast"]
QUICK_TRAIN = ["--subsample", "4", "--context", "80", "--max-steps", "100"]
AD = [sys.executable, "-m", "ad"]


def demo_option_files(work: Path, size: int) -> tuple[list[str], list[str]]:
    """`ad demo`'s own ``ad generate darkroom`` and AD ``ad train rl`` options for this room size (its defaults,
    taken from :class:`DarkRoomDemoConfig`, so the sweep measures exactly what the demo runs), written as the
    commands' ``--config`` files; returns the two ``["--config", path]`` arguments (flags after them override)."""
    demo = make_config(DarkRoomDemoConfig, {"size": size})
    generate = {k: v for k, v in demo.generate_options().items() if k not in ("size", "seed", "threads")}
    train = {k: v for k, v in demo.train_options().items() if k not in ("seed", "threads", "preset")}
    train.update(dict(demo.runs())["AD"])
    paths = work / f"demo_generate_{size}.json", work / f"demo_train_{size}.json"
    for path, options in zip(paths, (generate, train)):
        path.write_text(json.dumps(options, indent=1) + "\n")
    return ["--config", str(paths[0])], ["--config", str(paths[1])]


def run_one(work: Path, size: int, seed: int, extra: list[str], quick: bool, episodes: int,
            generate: list[str] = ()) -> dict:
    """Generate, train AD, evaluate one (size, seed); returns the figures of the run. ``generate`` = extra
    ``ad generate darkroom`` options (a source variant gets its own dataset folder), ``extra`` = extra ``ad train rl``
    options."""
    source = "_" + "_".join(a.lstrip("-") for a in generate) if generate else ""
    data = work / f"data_s{size}_r{seed}{source}"
    run = work / f"ad_s{size}_r{seed}{source}{'_' + '_'.join(extra) if extra else ''}"
    quiet = ["--progress", "false"]
    demo_generate, demo_train = demo_option_files(work, size)
    started = time.perf_counter()
    subprocess.run(AD + ["generate", "darkroom", "--out", str(data), "--size", str(size), "--seed", str(seed),
                         "--threads", "1", "--plots", "false", "--tensorboard", "false", *quiet,
                         *(QUICK_GENERATE if quick else demo_generate), *generate], check=True, stdout=subprocess.DEVNULL)
    generated = time.perf_counter()
    if not (run / "model" / "config.json").is_file():
        subprocess.run(AD + ["train", "rl", "--data", str(data), "--out", str(run), "--threads", "1", "--seed",
                             str(seed), *quiet, *(QUICK_TRAIN if quick else demo_train), *extra],
                       check=True, stdout=subprocess.DEVNULL)
    trained = time.perf_counter()
    subprocess.run(AD + ["eval", "--ckpt", str(run), "--data", str(data), "--episodes", str(episodes), "--seeds", "3",
                         "--threads", "1", "--out", str(run / "eval"), *quiet], check=True, stdout=subprocess.DEVNULL)
    summary = json.loads((run / "eval" / "eval.json").read_text())
    ad = summary["policies"]["AD"]
    norm = np.asarray(ad["normalised"])
    returns = np.asarray(ad["returns"])  # (tasks, seeds, episodes)
    optimal = summary["optimal_mean_return"]
    late = returns[:, :, 40:60].mean(axis=2) if returns.shape[2] >= 60 else returns.mean(axis=2)
    return {"size": size, "seed": seed, "extra": extra, "generate": list(generate), "ep1_5": float(norm[:5].mean()),
            "ep36_40": float(norm[35:40].mean()) if len(norm) >= 40 else None,
            "ep51_60": float(norm[50:60].mean()) if len(norm) >= 60 else None,
            "first90": next((i + 1 for i, v in enumerate(norm) if v >= 0.9), None),
            "collapsed_runs": int((late < 0.1 * optimal).sum()), "runs": int(late.size),
            "generate_s": generated - started, "train_s": trained - generated,
            "eval_s": time.perf_counter() - trained}


def options_label(row: dict) -> str:
    """The options a row was run with beyond the sweep's defaults, or "defaults" (or the row's own "label")."""
    if row.get("label"):
        return row["label"]
    options = " ".join([*(f"generate {a}" for a in [" ".join(row.get("generate", []))] if a), *row["extra"]])
    return options or "defaults"


def plot(rows: list[dict], path: Path) -> None:
    """AD's return / optimal at episodes 36-40 per room size, one panel per option set: each seed a dot, the mean
    over seeds a line, the 0.9 goal dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = sorted({options_label(r) for r in rows}, key=lambda label: (label != "defaults", label))
    ncols = min(3, len(labels))
    nrows = -(-len(labels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.8 * ncols, 3.2 * nrows), sharey=True, squeeze=False)
    for ax in axes.flat[len(labels):]:
        ax.set_visible(False)
    for ax, label in zip(axes.flat, labels):
        mine = [r for r in rows if options_label(r) == label and r["ep36_40"] is not None]
        sizes = sorted({r["size"] for r in mine})
        for r in mine:
            ax.scatter(r["size"], r["ep36_40"], color=f"C{r['seed'] % 10}", s=18, zorder=3, label=f"seed {r['seed']}")
        ax.plot(sizes, [np.mean([r["ep36_40"] for r in mine if r["size"] == n]) for n in sizes], color="k", lw=1)
        ax.axhline(0.9, color="grey", ls="--", lw=0.8)
        ax.set_title(textwrap.fill(label, 48), fontsize=8)
        ax.set_xlabel("room side")
        ax.set_xticks(sizes)
        handles = {h.get_label(): h for h in ax.collections}
        ax.legend([handles[k] for k in sorted(handles)], sorted(handles), fontsize=7, loc="lower left")
    for row in axes:
        row[0].set_ylabel("AD return / optimal, ep. 36-40")
    axes[0][0].set_ylim(0, 1.05)
    fig.suptitle("DarkRoom, held-out goals (dots: seeds; line: mean)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(args: argparse.Namespace) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sizes, seeds = ([5], [0]) if args.quick else (args.sizes, args.seeds)
    results = work / "results.jsonl"
    if not args.collect:
        for size in sizes:
            for seed in seeds:
                row = run_one(work, size, seed, args.extra, args.quick, 40 if args.quick else 60,
                              args.generate.split())
                print(json.dumps(row), flush=True)
                with open(results, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    figures = []
    for row in sorted(rows, key=lambda r: (r.get("generate", []), r["extra"], r["size"], r["seed"])):
        options = options_label(row)
        fig = figure(f"AD return / optimal at episodes 36-40, held-out goals, DarkRoom {row['size']}x{row['size']} "
                     f"seed {row['seed']} ({options}; episodes 1-5 {row['ep1_5']:.2f}, 51-60 "
                     f"{row['ep51_60'] if row['ep51_60'] is None else round(row['ep51_60'], 2)}; "
                     f"{row['collapsed_runs']}/{row['runs']} goal x seed runs collapsed)",
                     "return / optimal", row["ep36_40"], None, ">= 0.9")
        figures.append({**fig, **{k: v for k, v in row.items() if k not in fig}})
    report("ad_darkroom_sweep", figures, args.quick, page="darkroom")
    if not args.quick:
        plot(rows, RESULTS / "ad_darkroom_sweep.png")


if __name__ == "__main__":
    main(ARGS)
