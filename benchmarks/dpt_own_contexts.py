"""DPT fine-tuned on contexts of its own runs: does training on what it sees when it acts lift DPT on held-out tasks?

DPT is trained on the source's histories but acts on contexts of its own interactions, which look different (its
own search, its own repeats). Per seed (a held-out split): the family's demo trains DPT (``ad demo --task <family>
--methods dpt``); then, for each round, ``ad eval --split train --record`` runs the latest DPT in context on the
training tasks and records its runs, and ``ad train rl --objective dpt --init-from <latest> --subsample 1`` fine-tunes
it on them (every row labelled with the family's optimal action); finally one ``ad eval`` runs DPT and every round's
model on the held-out tasks. ours = a model's return / optimum over episodes 36-40 (``--window``), reference = the
demo's DPT on the same tasks (ratio > 1: the rounds helped), goal >= 0.9 of the optimum.

    python benchmarks/dpt_own_contexts.py --config configs/keydoor/dpt_own_contexts.yaml
    python benchmarks/dpt_own_contexts.py --quick      # tiny settings, about a minute

Results: benchmarks/results/dpt_own_contexts.json (per family: each seed's figures and their means; a run of some
seeds keeps the family's other seeds'), plot benchmarks/results/dpt_own_contexts_<family>.png.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, earlier_seed_rows, figure, merge_report, parse_args  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="keydoor", choices=("keydoor", "darkroom"), help="task family")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds (held-out splits)")
    parser.add_argument("--out", default="data/bench-dpt-own-contexts", help="work folder (one per family and seed)")
    parser.add_argument("--rounds", type=int, default=2, help="record-then-fine-tune rounds")
    parser.add_argument("--steps", type=int, default=2000, help="fine-tuning optimiser steps per round")
    parser.add_argument("--record-tasks", type=int, default=0,
                        help="training tasks each round records runs on (0: all of them)")
    parser.add_argument("--record-seeds", type=int, default=2, help="recorded runs per training task and round")
    parser.add_argument("--record-episodes", type=int, default=40, help="episodes in context of each recorded run")
    parser.add_argument("--episodes", type=int, default=40, help="in-context episodes of the held-out evaluation")
    parser.add_argument("--eval-seeds", type=int, default=3, help="evaluation runs per held-out task")
    parser.add_argument("--window", type=int, nargs=2, default=[36, 40], metavar=("FIRST", "LAST"),
                        help="episodes (1-based, inclusive) the figure averages")
    parser.add_argument("--quick", action="store_true", help="a tiny version of the same work")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from ad import registry  # noqa: E402
from ad.config import make_config  # noqa: E402

QUICK = dict(rounds=1, steps=3, record_tasks=3, record_seeds=1, record_episodes=3, episodes=4, eval_seeds=1,
             window=[3, 4])
#: Tiny demo settings of ``--quick`` per family.
QUICK_DEMO = {
    "keydoor": dict(tasks=10, steps_per_task=5000, heldout_fraction=0.2, dpt_steps=3, ad_steps=3, episodes=3,
                    seeds=1, context=20, subsample=2),
    "darkroom": dict(size=5, steps_per_goal=2000, dpt_steps=3, ad_steps=3, episodes=3, seeds=1, context=20,
                     subsample=2),
}
TINY_MODEL = {"n_embd": 16, "n_head": 2, "n_ff": 32, "warmup_steps": 1, "batch_size": 2}
TITLES = {"keydoor": "Key-to-Door 9x9", "darkroom": "DarkRoom 9x9"}
CAPABILITY = "In-context methods on the same data (ad demo --methods)"


def demo(args: argparse.Namespace, seed: int, work: Path) -> Path:
    """The family's demo with DPT only (skipped where its model exists); returns its DPT run folder."""
    entry = registry.get_demo(args.family, "rl")
    options = {"methods": "dpt", "seed": seed, "out": str(work / "demo"), "episodes": args.episodes,
               "seeds": args.eval_seeds}
    if args.quick:
        options.update(QUICK_DEMO[args.family], train_overrides={**TINY_MODEL, "progress": False})
    run = work / "demo" / "dpt"
    if not (run / "model" / "config.json").is_file():
        entry.run(make_config(entry.config_cls, options, source="dpt_own_contexts demo options"))
    return run


def record(args: argparse.Namespace, seed: int, ckpt: Path, data: Path, folder: Path) -> dict:
    """``ad eval --split train --record folder``: ``ckpt`` in context on the training tasks, its runs recorded
    (skipped where they are); returns that evaluation's summary."""
    from ad.commands.evaluate import EvalConfig, evaluate

    summary_file = folder.with_name(folder.name + "-eval") / "eval.json"
    if summary_file.is_file() and (folder / "dataset.json").is_file():
        return json.loads(summary_file.read_text())
    return evaluate(EvalConfig(ckpt=str(ckpt), name="DPT", data=str(data), split="train",
                               max_tasks=args.record_tasks or None, episodes=args.record_episodes,
                               seeds=args.record_seeds, seed=seed, record=str(folder),
                               out=str(summary_file.parent), progress=False))


def fine_tune(args: argparse.Namespace, start: Path, data: Path, run: Path) -> Path:
    """``ad train rl --objective dpt --init-from start`` on the recorded runs ``data``, with ``start``'s model and
    training options but every episode (``--subsample 1``) and ``--steps`` steps (skipped where finished)."""
    train = registry.get("train", "rl")
    saved = yaml.safe_load((start / "config.yaml").read_text())
    options = {**saved, "data": str(data), "out": str(run), "init_from": str(start), "max_steps": args.steps,
               "subsample": 1, "warmup_steps": 0, "resume": (run / "checkpoints" / "last.ckpt").is_file()}
    if not (run / "model" / "config.json").is_file():
        train.run(make_config(train.config_cls, options, source=f"fine-tuning options of {start}"))
    return run


def one_seed(args: argparse.Namespace, seed: int) -> dict:
    """The demo's DPT, ``--rounds`` rounds of recording and fine-tuning, and one held-out evaluation of them all."""
    from ad.commands.evaluate import EvalConfig, evaluate

    work = Path(args.out) / f"{args.family}-seed{seed}{'-quick' if args.quick else ''}"
    latest = demo(args, seed, work)
    data = work / "demo" / args.family
    runs, on_train = {"DPT": latest}, []
    for r in range(1, args.rounds + 1):
        summary = record(args, seed, latest, data, work / f"own-{r}")
        on_train.append(window_mean(summary["policies"]["DPT"]["normalised"], args.window))
        latest = runs[f"DPT own {r}"] = fine_tune(args, latest, work / f"own-{r}", work / f"dpt-own-{r}")
    (first, ckpt), *others = runs.items()
    summary = evaluate(EvalConfig(ckpt=str(ckpt), name=first, data=str(data), episodes=args.episodes,
                                  seeds=args.eval_seeds, seed=seed, models=[f"{k}={v}" for k, v in others],
                                  out=str(work / "eval"), progress=False))
    rows = summary["policies"]
    return {"seed": seed, "heldout_tasks": len(summary["tasks"]), "window": list(args.window),
            "models": {name: {"window": window_mean(rows[name]["normalised"], args.window),
                              "first_5": window_mean(rows[name]["normalised"], (1, 5))} for name in runs},
            "random": window_mean(rows["random"]["normalised"], args.window),
            "recorded_on_train": on_train, "curves": {name: rows[name]["normalised"] for name in [*runs, "random"]}}


def window_mean(curve: list[float], window: Any) -> float:
    """Mean of a per-episode curve over ``window`` = (first, last), 1-based and inclusive."""
    return float(np.mean(np.asarray(curve, dtype=float)[window[0] - 1:window[1]]))


def plot(rows: list[dict], path: Path, title: str) -> None:
    """Return / optimum per in-context episode of every model, one panel per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 3.6), squeeze=False)
    for ax, row in zip(axes[0], rows):
        for name, curve in row["curves"].items():
            ax.plot(np.arange(1, len(curve) + 1), curve, label=name, ls=":" if name == "random" else "-")
        ax.axhline(0.9, color="grey", lw=0.8, ls="--")
        ax.set(title=f"{title}, seed {row['seed']}", xlabel="episode in context", ylabel="return / optimum",
               ylim=(0, 1.05))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(args: argparse.Namespace) -> None:
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    name, tag, title = "dpt_own_contexts", args.family, TITLES[args.family]
    earlier = earlier_seed_rows(name, args.quick, tag, args.seeds)  # this family's other seeds, run before
    rows = sorted(earlier + [one_seed(args, seed) for seed in args.seeds], key=lambda r: r["seed"])
    first, last = rows[0]["window"]
    goal = ">= 0.9 of the optimum"
    figures = []
    for model in rows[0]["models"]:
        for row in rows:
            base = row["models"]["DPT"]["window"]
            fig = figure(f"DPT on its own contexts, {title} seed {row['seed']}: {model}, return / optimum at "
                         f"episodes {first}-{last} vs the demo's DPT", "fraction of optimum",
                         row["models"][model]["window"], base, goal)
            figures.append({**fig, "details": row} if model == "DPT" else fig)
        mean = float(np.mean([r["models"][model]["window"] for r in rows]))
        base = float(np.mean([r["models"]["DPT"]["window"] for r in rows]))
        figures.append(figure(f"DPT on its own contexts, {title}: {model}, return / optimum at episodes {first}-{last}"
                              f" vs the demo's DPT, mean of {len(rows)} seeds", "fraction of optimum", mean, base,
                              goal))
    merge_report(name, args.quick, tag, figures, capability=CAPABILITY, page="in-context-methods")
    image = RESULTS / f"{name}_{tag}{'_quick' if args.quick else ''}.png"
    plot(rows, image, title)
    for row in rows:
        cells = ", ".join(f"{m} {v['first_5']:.3f} -> {v['window']:.3f}" for m, v in row["models"].items())
        print(f"{title} seed {row['seed']} (episodes 1-5 -> {first}-{last}): {cells}; random {row['random']:.3f}; "
              f"recorded runs on training tasks: {', '.join(f'{v:.3f}' for v in row['recorded_on_train'])}")
    print(f"wrote {image}")


if __name__ == "__main__":
    main(ARGS)
