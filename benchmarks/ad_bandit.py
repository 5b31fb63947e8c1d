"""Algorithm Distillation on k-armed bandits: AD's cumulative regret over the in-context pulls on held-out instances,
next to Thompson sampling (run on the same instances with the same reward noise), UCB1, uniformly random pulls
and ED (expert distillation: the same model trained on the last 10% of each history). The source AD distils is the
demo's (UCB1 with c = 0.3 on Bernoulli, 0.5 on Gaussian bandits; that UCB1 is shown too) or ``--source thompson``.
The whole demo (generate -> train AD -> train ED -> evaluate) runs once per seed; seeds draw different held-out
splits; every figure is the mean over seeds with each seed's value beside it.

    python benchmarks/ad_bandit.py [--seeds 0 1] [--kind bernoulli] [--arms 5] [--out data/bench-bandit]
    python benchmarks/ad_bandit.py --quick      # 200 instances x 100 pulls, short training (well under a minute a seed)

Results: benchmarks/results/ad_bandit.json (+ .png) for 5-armed Bernoulli bandits, ad_bandit_<kind><arms>.json for
other settings (+ _thompson or _ucb<c> for a source other than the demo's default), *_quick.json for --quick.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, parse_args, report, timed  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="demo seeds (held-out splits)")
    parser.add_argument("--kind", default="bernoulli", choices=["bernoulli", "gaussian"])
    parser.add_argument("--arms", type=int, default=5)
    parser.add_argument("--out", default="data/bench-bandit", help="work folder (one demo folder per seed)")
    parser.add_argument("--keep", action="store_true", help="keep finished demo folders (re-runs skip their stages)")
    parser.add_argument("--quick", action="store_true", help="a small version of the same work")
    parser.add_argument("--ad-steps", type=int, default=0, help="AD optimiser steps (0: the demo's default)")
    parser.add_argument("--source", default="auto", choices=["auto", "thompson", "ucb"],
                        help="source AD distils (auto: the demo's default, UCB1)")
    parser.add_argument("--ucb-c", type=float, default=-1.0,
                        help="exploration coefficient of the UCB1 source (-1: the demo's default for --kind)")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
from ad.config import make_config  # noqa: E402
from tasks.bandit.demo import POLICIES, BanditDemoConfig, run_demo  # noqa: E402


QUICK = dict(instances=200, pulls=100, ad_steps=150, ed_steps=50)


def main(args: argparse.Namespace) -> None:
    demo = make_config(BanditDemoConfig, {"kind": args.kind, "source": args.source, "ucb_c": args.ucb_c})
    default = make_config(BanditDemoConfig, {"kind": args.kind})
    options = {"kind": args.kind, "arms": args.arms, "source": demo.source, "ucb_c": demo.ucb_c,
               **(QUICK if args.quick else {}), **({"ad_steps": args.ad_steps} if args.ad_steps else {})}
    source = "thompson" if demo.source == "thompson" else f"ucb{demo.ucb_c:g}"
    variant = "" if (demo.source, demo.ucb_c) == (default.source, default.ucb_c) else f"-{source}"

    runs = []
    for seed in args.seeds:
        steps = f"-steps{args.ad_steps}" if args.ad_steps else ""
        out = Path(args.out) / f"{args.kind}{args.arms}{variant}{steps}-seed{seed}{'-quick' if args.quick else ''}"
        if out.exists() and not args.keep:
            shutil.rmtree(out)
        recorded = first_run_timings(out)
        seconds, summary = timed(lambda: run_demo(out, seed=seed, **options))
        if recorded is not None:  # a kept demo: its stages were skipped now, their time is the first run's
            seconds, summary["timings"] = recorded["total"], recorded
        runs.append((seed, seconds, summary))
        print(f"seed {seed}: {seconds:.0f} s, AD / Thompson regret {summary['ratio_to_thompson']['AD']:.2f}")

    pulls = runs[0][2]["pulls"]
    held = runs[0][2]["instances"]
    setting = (f"{args.arms}-armed {args.kind}, {held} held-out instances x {runs[0][2]['runs_per_instance']} runs, "
               f"{pulls} pulls, source {demo.source}{f' c={demo.ucb_c:g}' if demo.source == 'ucb' else ''}, "
               f"{args.ad_steps or 'default'} AD steps, seeds {', '.join(str(s) for s, _, _ in runs)}")

    def regret(name: str) -> list[float]:
        return [summary["policies"][name]["final_regret"] for _, _, summary in runs]

    def spread(ours: list[float], reference: list[float] | None) -> dict:
        per_seed = [{"seed": s, "ours": o, **({"reference": r, "ratio": o / r} if reference else {})}
                    for (s, _, _), o, r in zip(runs, ours, reference or [None] * len(ours))]
        values = [p.get("ratio", p["ours"]) for p in per_seed]
        return {"per_seed": per_seed, "spread": [min(values), max(values)]}

    ts = regret("Thompson")
    figures = []
    names = policy_names(runs)
    goals = {"AD": "<= 1.2x", "ED": ">> AD's ratio", "random": ">> AD's ratio"}
    for name in [n for n in names if n != "Thompson"]:
        ours = regret(name)
        fig = figure(f"{'regret' if name == 'AD' else f'regret of {name}'}: cumulative expected regret after "
                     f"{pulls} pulls, {name} / Thompson sampling ({setting})", "regret", float(np.mean(ours)),
                     float(np.mean(ts)), goals.get(name, "-"), higher_is_better=False)
        figures.append({**fig, **spread(ours, ts)})
    for name in [n for n in names if n not in ("AD", "Thompson", "UCB1")]:  # ED, random and a UCB source
        ours, ref = regret("AD"), regret(name)
        fig = figure(f"regret of AD / {name} after {pulls} pulls ({setting})", "regret", float(np.mean(ours)),
                     float(np.mean(ref)), "-" if name.startswith("UCB1") else "far below 1", higher_is_better=False)
        figures.append({**fig, **spread(ours, ref)})
    walls = [seconds for _, seconds, _ in runs]
    figures.append({**figure(f"demo wall time, generate + train AD + train ED + evaluate ({setting})", "s",
                             float(np.mean(walls)), None, "<= 600 s on 2 cores", higher_is_better=False),
                    **spread(walls, None),
                    "stages": [{"seed": s, **{k: round(v, 1) for k, v in summary["timings"].items()}}
                               for s, _, summary in runs]})
    bench = "ad_bandit" if (args.kind, args.arms) == ("bernoulli", 5) else f"ad_bandit_{args.kind}{args.arms}"
    bench += f"_steps{args.ad_steps}" if args.ad_steps else ""
    bench += variant.replace("-", "_")
    report(bench, figures, args.quick, page="bandit")
    if not args.quick:
        plot(runs, RESULTS / f"{bench}.png", setting)


def first_run_timings(out: Path) -> dict | None:
    """Stage times of the run that trained a kept demo folder (None for a fresh one). A re-run skips the trained
    stages and records 0 s for them in regret.json, so the first run's times are kept in first_run_timings.json."""
    kept, finished = out / "first_run_timings.json", out / "regret.json"
    if not kept.is_file() and finished.is_file():
        timings = json.loads(finished.read_text())["timings"]
        if timings.get("train AD", 0.0) > 0.0:
            kept.write_text(json.dumps(timings, indent=1))
    return json.loads(kept.read_text()) if kept.is_file() else None


def policy_names(runs) -> list[str]:
    """The demo's policies in plotting order, with a UCB1 source of another coefficient after UCB1."""
    present = list(runs[0][2]["policies"])
    return [n for n in POLICIES if n in present] + [n for n in present if n not in POLICIES]


def plot(runs, path: Path, setting: str) -> None:
    """Mean cumulative regret over seeds per policy; the band spans the seeds' curves (min to max)."""
    from ad.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for name in policy_names(runs):
        curves = np.stack([np.asarray(summary["policies"][name]["mean"]) for _, _, summary in runs])  # (seeds, P)
        x = np.arange(1, curves.shape[1] + 1)
        mean = curves.mean(0)
        ax.plot(x, mean, label=f"{name}: {mean[-1]:.1f}", lw=2.2 if name == "AD" else 1.3)
        ax.fill_between(x, curves.min(0), curves.max(0), alpha=0.25)
    ax.set_xlabel("pull (in context, held-out instances)")
    ax.set_ylabel("cumulative expected regret")
    ax.set_yscale("log")
    ax.set_title("AD vs Thompson sampling and baselines\n" + textwrap.fill(f"{setting}; band: spread over seeds", 100),
                 fontsize=9)
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3, which="both")
    save_figure(fig, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(ARGS)
