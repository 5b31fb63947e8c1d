"""Algorithm Distillation on DarkRoom beyond the setting it was tuned on: ``ad demo`` (default settings) on several
seeds (different held-out goals) and room sizes, AD's return / optimal on held-out goals at episodes 36-40, next to
ED, the source A2C's own first episodes and random, and the episode where AD first reaches 90% of the optimum.

    python benchmarks/ad_darkroom.py [--seeds 0 1 2] [--sizes 5 7 9 11] [--out data/bench-darkroom] [--keep]
    python benchmarks/ad_darkroom.py --quick      # 5x5 room, short histories and training (about a minute)

Every demo is one ``ad demo --task darkroom --size S --seed R`` with nothing else changed. Results:
benchmarks/results/ad_darkroom.json (one figure per size x seed plus the worst and mean over all) and
ad_darkroom.png (AD's in-context curve of every run); *_quick.* for --quick.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, report, timed  # noqa: E402

QUICK = dict(steps_per_goal=20_000, subsample=4, ad_steps=200, ed_steps=50, episodes=40, seeds=1, context=100)
GOAL = 0.9


def run_one(out: Path, size: int, seed: int, quick: bool) -> dict:
    """One demo; returns its eval summary with the wall time."""
    from ad import registry
    from ad.config import make_config

    cmd = registry.get_demo("darkroom", "rl")
    options = {"out": str(out), "size": size, "seed": seed, **(QUICK if quick else {})}
    seconds, _ = timed(lambda: cmd.run(make_config(cmd.config_cls, options, source="benchmark demo options")))
    summary = json.loads((out / "eval" / "eval.json").read_text())
    summary["seconds"] = seconds
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="demo seeds (held-out splits)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 7, 9, 11], help="room sizes")
    parser.add_argument("--out", default="data/bench-darkroom", help="work folder (one demo folder per run)")
    parser.add_argument("--keep", action="store_true", help="keep finished demo folders (re-runs skip their stages)")
    parser.add_argument("--quick", action="store_true", help="a small version of the same work")
    args = parser.parse_args()
    sizes, seeds = ([5], [0]) if args.quick else (args.sizes, args.seeds)

    rows = []
    for size in sizes:
        for seed in seeds:
            out = Path(args.out) / f"size{size}-seed{seed}{'-quick' if args.quick else ''}"
            if out.exists() and not args.keep:
                shutil.rmtree(out)
            summary = run_one(out, size, seed, args.quick)
            pol = summary["policies"]
            ad = np.asarray(pol["AD"]["normalised"])
            first = next((i + 1 for i, v in enumerate(ad) if v >= GOAL), None)
            row = {"size": size, "seed": seed, "seconds": summary["seconds"], "first_90": first, "curve": ad.tolist(),
                   **{f"{name}_36_40": float(np.mean(pol[name]["normalised"][35:40])) for name in pol
                      if len(pol[name]["normalised"]) >= 40},
                   **{f"{name}_1_5": float(np.mean(pol[name]["normalised"][:5])) for name in pol},
                   **{f"{name}_last_10": float(np.mean(pol[name]["normalised"][-10:])) for name in pol}}
            rows.append(row)
            print(f"size {size} seed {seed}: AD {row.get('AD_36_40', float('nan')):.3f} at episodes 36-40, "
                  f"first {GOAL:.0%} at episode {first}, {summary['seconds']:.0f} s", flush=True)

    figures = []
    for row in rows:
        name = f"AD return / optimal at episodes 36-40, held-out goals, DarkRoom {row['size']}x{row['size']} seed " \
               f"{row['seed']} (ED {row.get('ED_36_40', float('nan')):.2f}, source A2C " \
               f"{row.get('source_36_40', float('nan')):.2f}, random {row.get('random_36_40', float('nan')):.2f}; " \
               f"first 90% at episode {row['first_90']})"
        fig = figure(name, "return / optimal", row.get("AD_36_40", float("nan")), None, f">= {GOAL}")
        fig.update({k: v for k, v in row.items() if k != "curve"})
        figures.append(fig)
    values = [row.get("AD_36_40", float("nan")) for row in rows]
    setting = f"sizes {', '.join(map(str, sizes))} x seeds {', '.join(map(str, seeds))}"
    figures.append(figure(f"worst AD return / optimal at episodes 36-40 over {setting}", "return / optimal",
                          float(np.min(values)), None, f">= {GOAL}"))
    figures.append(figure(f"mean AD return / optimal at episodes 36-40 over {setting}", "return / optimal",
                          float(np.mean(values)), None, f">= {GOAL}"))
    walls = [row["seconds"] for row in rows]
    figures.append(figure(f"demo wall time, mean over {setting} (max {max(walls):.0f} s)", "s", float(np.mean(walls)),
                          None, "-", higher_is_better=False))
    report("ad_darkroom", figures, args.quick, page="darkroom")
    plot(rows, RESULTS / f"ad_darkroom{'_quick' if args.quick else ''}.png")


def plot(rows: list[dict], path: Path) -> None:
    """AD's in-context curve (return / optimal per episode) of every run, one colour per room size."""
    from ad.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colours = dict(zip(sorted({r["size"] for r in rows}), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for row in rows:
        curve = np.asarray(row["curve"])
        ax.plot(np.arange(1, len(curve) + 1), curve, color=colours[row["size"]], alpha=0.8,
                label=f"{row['size']}x{row['size']} seed {row['seed']}")
    ax.axhline(GOAL, color="grey", ls="--", lw=1)
    ax.axvspan(36, 40, color="grey", alpha=0.15)
    ax.set_xlabel("episode in context")
    ax.set_ylabel("AD return / optimal (held-out goals)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    save_figure(fig, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
