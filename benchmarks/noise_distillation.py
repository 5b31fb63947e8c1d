"""Noise distillation (AD-epsilon): does AD trained on noisy-demonstrator histories whose best expected return is
capped at half the optimum exceed the best in its data on held-out tasks?

Per family (DarkRoom 9x9, Key-to-Door 9x9) and seed (seeds draw different held-out splits, and Key-to-Door's pairs):
``ad generate <family> --source noise --max-return-fraction 0.5`` -> ``ad train rl`` (AD, the demo preset) ->
``ad eval`` on the held-out tasks. ours = AD's mean return / optimum over the last in-context episodes of the window;
reference = the data's best: the mean return / optimum of the histories' lowest noise level (the best policy in the
data, measured on the training tasks' histories; its exact expectation is the cap); ratio = ours / reference.

    python benchmarks/noise_distillation.py --config configs/darkroom/noise_distillation.yaml
    python benchmarks/noise_distillation.py --config configs/keydoor/noise_distillation.yaml
    python benchmarks/noise_distillation.py --quick      # tiny settings, well under a minute

Results: benchmarks/results/noise_distillation.json (one figure per family and seed, plus the means per family; a run
for one family (and ``--variant``) keeps the other families' figures, and a run of some seeds the family's other
seeds'), *_quick.json for --quick.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import earlier_seed_rows, figure, merge_report, parse_args  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="darkroom", choices=("darkroom", "keydoor"), help="task family")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds (held-out splits)")
    parser.add_argument("--out", default="data/bench-noise", help="work folder (one folder per family and seed)")
    parser.add_argument("--cap", type=float, default=0.5, help="--max-return-fraction of the noise source")
    parser.add_argument("--tasks", type=int, default=0, help="Key-to-Door pairs (0: the family's default)")
    parser.add_argument("--streams", type=int, default=10, help="histories per task (--num-envs)")
    parser.add_argument("--episodes-per-stream", type=int, default=60, help="episodes (noise levels) per history")
    parser.add_argument("--episode-length", type=int, default=0, help="steps per episode (0: the family's default)")
    parser.add_argument("--terminate-on-goal", type=int, default=0, help="DarkRoom: 1 = end episodes at the goal")
    parser.add_argument("--context", type=int, default=200, help="AD context in transitions")
    parser.add_argument("--subsample", type=int, default=1, help="AD trains on every k-th episode")
    parser.add_argument("--ad-steps", type=int, default=2000, help="AD optimiser steps")
    parser.add_argument("--batch-size", type=int, default=32, help="AD windows per optimiser step")
    parser.add_argument("--episodes", type=int, default=40, help="in-context episodes at evaluation")
    parser.add_argument("--window", type=int, default=5, help="last in-context episodes the figure averages")
    parser.add_argument("--eval-seeds", type=int, default=3, help="evaluation runs per held-out task")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="sampling temperature of AD's evaluation (`ad eval --temperature`; 1 = its policy as "
                             "trained, < 1 nearer its greedy action)")
    parser.add_argument("--greedy", type=int, default=1, help="1 = also evaluate AD acting greedily (the argmax of "
                                                               "its policy) beside the default sampled actions")
    parser.add_argument("--variant", default="", help="name of a variant of these settings (e.g. 6k): it tags the "
                                                       "figures, which then sit beside the family's others")
    parser.add_argument("--headline", action="store_true",
                        help="this run's mean over the seeds becomes the capability's headline, replacing the one in "
                             "the results file")
    parser.add_argument("--quick", action="store_true", help="a small version of the same work")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402

from ad import registry  # noqa: E402
from ad.config import make_config  # noqa: E402

QUICK = dict(tasks=12, streams=2, episodes_per_stream=8, ad_steps=20, episodes=6, window=2, eval_seeds=1, context=60,
             batch_size=4)
TITLES = {"darkroom": "DarkRoom 9x9", "keydoor": "Key-to-Door 9x9"}
#: The headline-page row of these figures (its headline: the mean of the run given ``--headline``).
CAPABILITY = "Noise distillation (AD-epsilon)"


def generate_options(args: argparse.Namespace, seed: int) -> dict:
    """``ad generate <family> --source noise`` options of one seed."""
    length = args.episode_length or (20 if args.family == "darkroom" else 50)
    steps = args.streams * args.episodes_per_stream * length
    common = {"source": "noise", "seed": seed, "num_envs": args.streams, "episode_length": length,
              "max_return_fraction": args.cap, "progress": False, "plots": False, "tensorboard": False}
    if args.family == "darkroom":
        return {**common, "size": 9, "steps_per_goal": steps, "terminate_on_goal": bool(args.terminate_on_goal)}
    return {**common, "size": 9, "steps_per_task": steps, **({"tasks": args.tasks} if args.tasks else {})}


def data_best(data: Path, split: str) -> tuple[float, float]:
    """(mean measured, mean exact) return / optimum of the lowest noise level over the ``split`` tasks' units."""
    from ad.history import HistoryReader

    reader = HistoryReader(data)
    names = set(reader.metadata["split"][split])
    infos = [u["info"] for u in reader.units() if u["task"] in names]
    return (float(np.mean([i["lowest_noise_mean_fraction"] for i in infos])),
            float(np.mean([i["expected_best_fraction"] for i in infos])))


def one_seed(args: argparse.Namespace, seed: int) -> dict:
    """Generate, train AD, evaluate; AD's last-window return / optimum and the data's best."""
    from ad.commands.evaluate import EvalConfig, evaluate
    from ad.demo import eval_folder_name

    work = Path(args.out) / f"{args.family}-seed{seed}{'-quick' if args.quick else ''}"
    data = work / "data"
    generate = registry.get("generate", args.family)
    generate.run(make_config(generate.config_cls, {**generate_options(args, seed), "out": str(data)}))
    train = registry.get("train", "rl")
    run = work / "ad"
    if not (run / "model" / "config.json").is_file():
        train.run(make_config(train.config_cls, {
            "data": str(data), "out": str(run), "preset": "demo", "context": args.context,
            "subsample": args.subsample, "max_steps": args.ad_steps, "batch_size": args.batch_size, "seed": seed,
            "threads": 1, "progress": False, "resume": (run / "checkpoints" / "last.ckpt").is_file()}))
    summary = evaluate(EvalConfig(ckpt=str(run), data=str(data), episodes=args.episodes, seeds=args.eval_seeds,
                                  seed=seed, temperature=args.temperature,
                                  out=str(work / eval_folder_name(args.temperature)), progress=False))
    curve = np.array(summary["policies"]["AD"]["normalised"])  # (episodes,) mean return / optimum
    greedy = None
    if args.greedy:
        greedy_summary = evaluate(EvalConfig(ckpt=str(run), data=str(data), episodes=args.episodes,
                                             seeds=args.eval_seeds, seed=seed, greedy=True,
                                             out=str(work / "eval-greedy"), progress=False))
        greedy = float(np.array(greedy_summary["policies"]["AD"]["normalised"])[-args.window:].mean())
    random = np.array(summary["policies"]["random"]["normalised"])
    measured, exact = data_best(data, "train")
    heldout_measured, _ = data_best(data, "heldout")
    return {"seed": seed, "ad": float(curve[-args.window:].mean()), "ad_first": float(curve[:5].mean()),
            "ad_greedy": greedy,
            "random": float(random[-args.window:].mean()), "data_best": measured, "data_best_exact": exact,
            "heldout_data_best": heldout_measured, "heldout_tasks": len(summary["tasks"]),
            "temperature": args.temperature,
            "window": [args.episodes - args.window + 1, args.episodes]}


def main(args: argparse.Namespace) -> None:
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    title = TITLES[args.family] + (f" ({args.variant})" if args.variant else "")
    tag = args.family + (f"-{args.variant}" if args.variant else "")
    name = "noise_distillation"
    earlier = earlier_seed_rows(name, args.quick, tag, args.seeds)  # this family's other seeds, run before
    rows = sorted(earlier + [one_seed(args, seed) for seed in args.seeds], key=lambda r: r["seed"])
    first, last = rows[0]["window"]
    goal = "ratio > 1 (above its data's best)"
    acting = "" if args.temperature == 1.0 else f" (actions sampled at temperature {args.temperature:g})"
    figures = []
    for row in rows:
        fig = figure(f"noise distillation {title} seed {row['seed']}: AD{acting} return / optimum at episodes "
                     f"{first}-{last} vs the data's best (cap {args.cap})", "fraction of optimum", row["ad"],
                     row["data_best"], goal)
        figures.append({**fig, "details": row})
    mean_ad, mean_best = float(np.mean([r["ad"] for r in rows])), float(np.mean([r["data_best"] for r in rows]))
    figures.append({**figure(f"noise distillation {title}: AD{acting} return / optimum at episodes {first}-{last} "
                             f"vs the data's best (cap {args.cap}), mean of {len(rows)} seeds", "fraction of optimum",
                             mean_ad, mean_best, goal),
                    "headline": args.headline and not args.quick})
    if figures[-1]["headline"]:
        tempered = "" if args.temperature == 1.0 else f", T = {args.temperature:g}"
        figures[-1].update(vs="data's best", short=f"AD on held-out {TITLES[args.family]}, episodes {first}-{last}"
                                                   f"{tempered}")
    if all(r.get("ad_greedy") is not None for r in rows):
        mean_greedy = float(np.mean([r["ad_greedy"] for r in rows]))
        figures.append(figure(f"noise distillation {title}: AD acting greedily, return / optimum at episodes "
                              f"{first}-{last} vs the data's best (cap {args.cap}), mean of {len(rows)} seeds",
                              "fraction of optimum", mean_greedy, mean_best, goal))
    merge_report(name, args.quick, tag, figures, capability=CAPABILITY, page="in-context-methods")
    for row in rows:
        greedy = "-" if row["ad_greedy"] is None else f"{row['ad_greedy']:.3f}"
        print(f"{title} seed {row['seed']}: AD {row['ad']:.3f} of optimum at episodes {first}-{last} (first 5: "
              f"{row['ad_first']:.3f}); data's best {row['data_best']:.3f} (exact {row['data_best_exact']:.3f}); "
              f"ratio {row['ad'] / row['data_best']:.2f}x; greedy AD {greedy}; random {row['random']:.3f}")


if __name__ == "__main__":
    main(ARGS)
