"""The "moonlander" question: LunarLander learning histories written as text three ways, an LM trained from scratch
on each, and its held-out in-context return beside the RL-format AD on the same histories.

For each seed (a held-out split): `ad demo --task lunarlander --seed S --out <root>/seed<S>` (skipped where its
evaluation exists) gives the batched-PPO histories, the RL-format AD and ED and their in-context returns on the
held-out tasks; then for each template, `ad train lm --model scratch --template T` on the same histories (the same
model size, optimiser steps, batch and token budget for every template) and `ad eval` on the same held-out tasks,
evaluation seeds and episodes. Templates (``ad.formats.language``):

* ``vector``: fixed-width rounded numbers, read one character a token (``s +0.01 +1.41 ... a 2 r -2.37``);
* ``bins<L>``: one word per dimension, its signed log bin (``d0+1 d1+6 ... a2 r-5``);
* ``pairs<L>``: one word per pair of dimensions, both binned (``p0+1+6 p1-4+4 ... a2 r-5``).

Figures per template (mean over seeds, each seed given): tokens per transition (on the held-out histories), the
held-out return over episodes 1-5 and 6-10 with the RL-format AD's beside it, and its training time.
Plot: ``benchmarks/results/<name>.png`` (mean over seeds).

    python benchmarks/lunarlander_templates.py --config configs/lunarlander/templates.yaml   # runs what is missing
    python benchmarks/lunarlander_templates.py --config configs/lunarlander/templates.yaml --quick   # reads only
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, parse_args, report  # noqa: E402
from benchmarks.lunarlander_common import plot_returns  # noqa: E402

#: the results name of the current figures
NAME = "lunarlander_templates"
WINDOWS = {"episodes 1-5": slice(0, 5), "episodes 6-10": slice(5, 10)}
#: rows of the RL-format demo's evaluation shown beside the templates
RL_ROWS = {"AD": "RL-format AD", "ED": "RL-format ED", "source": "source (its first episodes)", "random": "random"}


def lm_label(template: str) -> str:
    """The evaluation's policy name of the LM trained on ``template``."""
    return f"LM from scratch, {template}"


def train_options(args: Any, template: str) -> list[str]:
    """`ad train lm` flags of one template's run (every template the same budget)."""
    return ["--model", "scratch", "--template", template, "--n-layer", str(args.n_layer), "--n-embd",
            str(args.n_embd), "--n-head", str(args.n_head), "--n-ff", str(4 * args.n_embd), "--context",
            str(args.context), "--max-tokens", str(args.max_tokens), "--stride", str(args.stride), "--loss-on",
            "actions", "--batch-size", str(args.batch_size), "--max-steps", str(args.steps), "--learning-rate",
            str(args.learning_rate), "--warmup-steps", str(max(1, args.steps // 10)), "--weight-decay", "0.01",
            "--val-every", "0", "--checkpoint-every", str(max(1, args.steps // 4)), "--threads", str(args.threads)]


def run_seed(args: Any, seed: int) -> dict[str, float]:
    """Run what is missing for one seed; returns each template's training seconds measured now (none if skipped)."""
    folder = Path(args.root) / f"seed{seed}"
    seconds: dict[str, float] = {}
    if not (folder / "eval" / "eval.json").is_file():
        subprocess.run([sys.executable, "-m", "ad", "demo", "--task", "lunarlander", "--config", args.demo_config,
                        "--seed", str(seed), "--out", str(folder)], check=True)
    demo = json.loads((folder / "eval" / "eval.json").read_text())
    data = folder / "lunarlander"
    for template in args.templates:
        run = folder / f"lm-{template}"
        if not (run / "model" / "lm.json").is_file():
            started = time.time()
            subprocess.run([sys.executable, "-m", "ad", "train", "lm", "--data", str(data), "--out", str(run),
                            "--seed", str(seed), *train_options(args, template)], check=True)
            seconds[template] = time.time() - started
            (run / "train_seconds.json").write_text(json.dumps({"seconds": round(seconds[template], 1)}))
        target = folder / "eval-lm" / template
        if not (target / "eval.json").is_file():
            subprocess.run([sys.executable, "-m", "ad", "eval", "--ckpt", str(run), "--data", str(data), "--name",
                            lm_label(template), "--episodes", str(demo["episodes"]), "--seeds", str(demo["seeds"]),
                            "--seed", str(seed), "--threads", str(args.threads), "--out", str(target)], check=True)
    return seconds


def tokens_per_transition(data: Path, template: str, rows: int = 2000) -> float:
    """Mean tokens of one transition of ``template`` (its scratch tokenizer) over the first ``rows`` rows of the
    first held-out history of ``data``."""
    from ad.formats.language import get_template
    from ad.history import HistoryReader
    from models.lm.context import encode_transition
    from models.lm.scratch import scratch_tokenizer

    reader = HistoryReader(data)
    heldout = reader.metadata["split"]["heldout"]
    stream = reader.streams(tasks=heldout[:1], columns=["state", "action", "reward", "step"])[0]
    t = get_template(template)
    tokenizer = scratch_tokenizer(reader, t)
    cols = {k: v[:rows] for k, v in stream.columns.items()}
    lengths = [len(encode_transition(t, tokenizer, {k: v[i] for k, v in cols.items()}))
               for i in range(len(cols["action"]))]
    return float(np.mean(lengths))


def covered(per_seed: dict[int, dict[str, np.ndarray]], seeds: list[int]) -> list[tuple[str, slice]]:
    """The :data:`WINDOWS` that every seed's evaluation covers (a short evaluation has no episodes 6-10)."""
    shortest = min(len(curve) for s in seeds for curve in per_seed[s].values())
    return [(window, part) for window, part in WINDOWS.items() if part.stop <= shortest]


def seed_curves(folder: Path, templates: list[str]) -> dict[str, np.ndarray]:
    """Row name -> mean return per episode (over held-out tasks x evaluation seeds) of one seed's folder."""
    demo = json.loads((folder / "eval" / "eval.json").read_text())
    curves = {label: np.asarray(demo["policies"][name]["mean"]) for name, label in RL_ROWS.items()
              if name in demo["policies"]}
    for template in templates:
        path = folder / "eval-lm" / template / "eval.json"
        if path.is_file():
            curves[lm_label(template)] = np.asarray(json.loads(path.read_text())["policies"][lm_label(template)]["mean"])
    return curves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default="data/bench-lunarlander-templates", help="folder of the per-seed runs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="demo seeds (held-out splits)")
    parser.add_argument("--templates", nargs="+", default=["vector", "bins8", "pairs8"],
                        help="Language-format templates compared")
    parser.add_argument("--demo-config", default="configs/lunarlander/demo.yaml",
                        help="`ad demo --task lunarlander` config: the histories, RL-format AD / ED, evaluation")
    parser.add_argument("--steps", type=int, default=500, help="optimiser steps of every LM")
    parser.add_argument("--batch-size", type=int, default=8, help="windows per optimiser step")
    parser.add_argument("--max-tokens", type=int, default=1024, help="token budget of a window (every template)")
    parser.add_argument("--context", type=int, default=256, help="most transitions in a window")
    parser.add_argument("--stride", type=int, default=16, help="distance between training-window starts")
    parser.add_argument("--n-layer", type=int, default=4, help="transformer blocks")
    parser.add_argument("--n-embd", type=int, default=128, help="width (feed-forward: 4x)")
    parser.add_argument("--n-head", type=int, default=4, help="attention heads")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="AdamW learning rate")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each training and evaluation")
    parser.add_argument("--quick", action="store_true", help="only read finished runs, run nothing")
    parser.add_argument("--name", default=NAME,
                        help="results name: benchmarks/results/<name>.json and .png; another name than the default "
                             "keeps an earlier budget for the record (its figures marked not current)")
    args = parse_args(parser)
    root = Path(args.root)
    measured: dict[int, dict[str, float]] = {}
    for seed in args.seeds:
        if not args.quick:
            measured[seed] = run_seed(args, seed)
    seeds = [s for s in args.seeds if (root / f"seed{s}" / "eval" / "eval.json").is_file()]
    if not seeds:
        raise SystemExit(f"no finished runs under {root} for seeds {args.seeds}")
    per_seed = {s: seed_curves(root / f"seed{s}", args.templates) for s in seeds}
    figures = []
    for template in args.templates:
        done = [s for s in seeds if lm_label(template) in per_seed[s]]
        if not done:
            continue
        tokens = {s: tokens_per_transition(root / f"seed{s}" / "lunarlander", template) for s in done}
        fig = figure(f"{template}: tokens per transition (seeds {', '.join(f'{s}: {v:.1f}' for s, v in tokens.items())})",
                     "tokens", float(np.mean(list(tokens.values()))), None, "-", higher_is_better=False)
        fig["per_seed"] = {str(s): v for s, v in tokens.items()}
        figures.append(fig)
        for window, part in covered(per_seed, done):
            values = {s: float(per_seed[s][lm_label(template)][part].mean()) for s in done}
            ad = {s: float(per_seed[s]["RL-format AD"][part].mean()) for s in done if "RL-format AD" in per_seed[s]}
            fig = figure(f"{template}: held-out return, {window} (seeds "
                         f"{', '.join(f'{s}: {v:.0f}' for s, v in values.items())}; RL-format AD "
                         f"{', '.join(f'{s}: {v:.0f}' for s, v in ad.items())})", "return",
                         float(np.mean(list(values.values()))), None, "-")  # returns < 0: no ratio
            fig["per_seed"] = {str(s): v for s, v in values.items()}
            figures.append(fig)
        train = {s: json.loads(p.read_text())["seconds"] for s in done
                 if (p := root / f"seed{s}" / f"lm-{template}" / "train_seconds.json").is_file()}
        if train:
            fig = figure(f"{template}: training time, {args.steps} steps (seeds "
                         f"{', '.join(f'{s}: {v:.0f}' for s, v in train.items())})", "s",
                         float(np.mean(list(train.values()))), None, "-", higher_is_better=False)
            fig["per_seed"] = {str(s): v for s, v in train.items()}
            figures.append(fig)
    figures.extend(headline(per_seed, seeds, args.templates))
    for label in RL_ROWS.values():
        for window, part in covered(per_seed, seeds):
            values = {s: float(per_seed[s][label][part].mean()) for s in seeds if label in per_seed[s]}
            if values:
                fig = figure(f"{label}: held-out return, {window} (seeds "
                             f"{', '.join(f'{s}: {v:.0f}' for s, v in values.items())})", "return",
                             float(np.mean(list(values.values()))), None, "-")
                fig["per_seed"] = {str(s): v for s, v in values.items()}
                figures.append(fig)
    plot(per_seed, seeds, RESULTS / f"{args.name}.png", args)
    # --quick runs nothing but reads the same finished runs: the figures are the full ones
    main_result = args.name == NAME
    report(args.name, figures if main_result else [{**f, "headline": False} for f in figures], quick=False,
           page="continuous", capability="LunarLander as text: Language-format templates for Box states",
           current=main_result)


def headline(per_seed: dict[int, dict[str, np.ndarray]], seeds: list[int], templates: list[str]) -> list[dict]:
    """The headline figure: the template whose LM has the highest held-out return over the last covered window (mean
    over the seeds that ran every template), the RL-format AD's beside it in the name (returns are negative here, so
    no ratio). The issue sets no goal for it: ``met`` says so."""
    done = [s for s in seeds if all(lm_label(t) in per_seed[s] for t in templates)]
    windows = covered(per_seed, done) if done else []
    if not windows:
        return []
    window, part = windows[-1]
    means = {t: float(np.mean([per_seed[s][lm_label(t)][part].mean() for s in done])) for t in templates}
    best = max(means, key=means.get)
    ad = [float(per_seed[s]["RL-format AD"][part].mean()) for s in done if "RL-format AD" in per_seed[s]]
    fig = figure(f"held-out return of the best of {len(templates)} text templates ({best}; "
                 f"{', '.join(f'{t} {v:.0f}' for t, v in means.items())}), {window}, mean of seeds "
                 f"{', '.join(map(str, done))}; RL-format AD on the same data {np.mean(ad):.0f}", "return",
                 means[best], None, "-")
    fig.update(headline=True, short="LunarLander histories as text: the best template's held-out return",
               met="no goal set", per_seed={str(s): float(per_seed[s][lm_label(best)][part].mean()) for s in done})
    return [fig]


def plot(per_seed: dict[int, dict[str, np.ndarray]], seeds: list[int], path: Path, args: Any) -> Path:
    """Mean over seeds of every row's return per episode, saved at ``path``."""
    return plot_returns(per_seed, seeds, path, f"LunarLander held-out tasks, mean of seeds {seeds}: LMs from scratch\n"
                        f"({args.n_layer} x {args.n_embd}, {args.steps} steps of {args.batch_size} x "
                        f"{args.max_tokens} tokens) vs RL format")


if __name__ == "__main__":
    main()
