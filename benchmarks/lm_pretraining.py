"""Does pretraining help Algorithm Distillation in the Language format? SmolLM2-135M + LoRA vs the Llama from scratch
trained at the same budget on the same text.

Per seed, both LMs train on one `ad demo` folder's DarkRoom histories (``<demo>/seed<S>/darkroom``, e.g. the folders
of ``benchmarks/ad_lm.py``) with the same text (the ``grid<N>`` template: row, column, action, reward), the same
windows (``--context`` transitions, ``--batch-size``, ``--steps``, ``--learning-rate``, the loss on every token, every
episode), then act in context on the same held-out goals and evaluation seeds (``ad eval``). The only differences are
the ones asked about: SmolLM2's pretrained weights (+ LoRA adapters, its BPE tokenizer, bfloat16 weights so that a CPU's
matrix units carry it) against 4 blocks of width 128 trained from scratch on a word tokenizer. Finished runs are
reused, so the figures can be re-read in seconds.

Figures per model and for random: held-out return / optimal at episodes 1-5 and 36-40 (per seed and mean); the
pretrained LM's over the scratch LM's at 36-40 (ratio > 1: pretraining helps at this budget; read it beside random's,
a ratio of two near-random figures means nothing); training seconds where this script trained the run. Plot:
``benchmarks/results/lm_pretraining.png`` (each model's in-context curve, mean over seeds).

    python benchmarks/lm_pretraining.py --demo data/ad_lm --out data/lm_pretraining --seeds 0 1
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, report  # noqa: E402

#: model name -> (label, `ad train lm` options of its own)
MODELS = {"smollm2-135m": ("SmolLM2-135M + LoRA (pretrained)", ["--model", "smollm2-135m", "--dtype", "bfloat16"]),
          "scratch": ("Llama 4 x 128 from scratch", ["--model", "scratch", "--preset", "scratch"])}
WINDOWS = {"episodes 1-5": slice(0, 5), "episodes 36-40": slice(35, 40)}


def train_command(model: str, data: Path, run: Path, args: argparse.Namespace, seed: int) -> list[str]:
    """The `ad train lm` command line of ``model`` at the shared budget: the demo's pretrained-LM options
    (:func:`models.lm.demo.grid_text_options`) for both models."""
    from ad.history import HistoryReader
    from models.lm.demo import grid_text_options

    size = HistoryReader(data).metadata["task_spec"]["size"]
    options = {**grid_text_options(size, args.context, args.steps), "data": data, "out": run,
               "context": args.context, "batch_size": args.batch_size, "max_steps": args.steps,
               "learning_rate": args.learning_rate,
               "subsample": 1, "val_every": 0, "watch_every": 0, "threads": args.threads, "seed": seed}
    flags = [part for name, value in options.items() for part in (f"--{name.replace('_', '-')}", str(value))]
    return ["ad", "train", "lm", *MODELS[model][1], *flags]


def run_model(model: str, data: Path, run: Path, args: argparse.Namespace, seed: int) -> dict:
    """Train (unless finished) and evaluate (unless done) one model; its eval.json plus training seconds if known."""
    seconds_file = run / "train_seconds.json"
    if not (run / "model" / "lm.json").is_file():
        start = time.perf_counter()
        subprocess.run(train_command(model, data, run, args, seed), check=True)
        seconds_file.write_text(json.dumps({"seconds": time.perf_counter() - start}))
    evaluation = run / "eval" / "eval.json"
    if not evaluation.is_file():
        subprocess.run(["ad", "eval", "--ckpt", str(run), "--data", str(data), "--name", MODELS[model][0],
                        "--episodes", str(args.episodes), "--seeds", str(args.eval_seeds), "--max-tasks",
                        str(args.max_tasks), "--seed", str(seed), "--threads", str(args.threads),
                        "--out", str(run / "eval")], check=True)
    summary = json.loads(evaluation.read_text())
    summary["train_seconds"] = json.loads(seconds_file.read_text())["seconds"] if seconds_file.is_file() else None
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", required=True, help="folder of the `ad demo --model lm` folders seed<S>/")
    parser.add_argument("--out", required=True, help="run folder: <out>/seed<S>/<model>/")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="demo seeds (held-out splits)")
    parser.add_argument("--steps", type=int, default=160, help="optimiser steps of each LM")
    parser.add_argument("--batch-size", type=int, default=8, help="windows per step")
    parser.add_argument("--context", type=int, default=40, help="transitions per window (and kept when acting)")
    parser.add_argument("--learning-rate", "--lr", type=float, default=1e-3,
                        help="peak learning rate of both (LoRA adapters / all)")
    parser.add_argument("--episodes", type=int, default=40, help="episodes in context at evaluation")
    parser.add_argument("--eval-seeds", type=int, default=2, help="evaluation seeds per held-out goal")
    parser.add_argument("--max-tasks", type=int, default=10, help="held-out goals evaluated")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every run")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS), help="models to run")
    args = parser.parse_args()
    results = {model: {} for model in args.models}  # model -> seed -> summary
    for seed in args.seeds:
        data = Path(args.demo) / f"seed{seed}" / "darkroom"
        for model in args.models:
            results[model][seed] = run_model(model, data, Path(args.out) / f"seed{seed}" / model, args, seed)
    figures, means, curves = [], {}, {}
    rows = [(model, MODELS[model][0]) for model in args.models] + [(args.models[0], "random")]
    for model, label in rows:
        runs = results[model]
        stacked = np.stack([np.asarray(r["policies"][label]["normalised"]) for r in runs.values()])  # (seeds, episodes)
        curves[label] = (stacked.mean(0), stacked.std(0))
        for window, part in WINDOWS.items():
            values = {s: float(np.mean(r["policies"][label]["normalised"][part])) for s, r in runs.items()}
            means[(label, window)] = float(np.mean(list(values.values())))
            fig = figure(f"{label}, held-out return / optimal, {window} (seeds "
                         f"{', '.join(f'{s}: {v:.2f}' for s, v in values.items())})", "return / optimal",
                         means[(label, window)], None, "-")
            fig["per_seed"] = {str(s): v for s, v in values.items()}
            figures.append(fig)
        seconds = [r["train_seconds"] for r in runs.values() if label != "random" and r["train_seconds"] is not None]
        if seconds:
            figures.append(figure(f"{label}, training seconds ({args.steps} steps x {args.batch_size} windows of "
                                  f"{args.context} transitions, {args.threads} thread(s))", "s",
                                  float(np.mean(seconds)), None, "-", higher_is_better=False))
    if len(args.models) == 2:
        pretrained, scratch = (means[(label, "episodes 36-40")] for label, _ in MODELS.values())
        figures.append(figure("pretrained over scratch, held-out return / optimal, episodes 36-40 (> 1: "
                              "pretraining helps at this budget)", "return / optimal", pretrained, scratch, "measured"))
    from models.lm.demo import plot_curves

    plot_curves(curves, 1.0, RESULTS / "lm_pretraining.png",
                title=f"Held-out DarkRoom goals, seeds {args.seeds}: pretrained vs scratch LM, {args.steps} steps x "
                      f"{args.batch_size}")
    report("lm_pretraining", figures, quick=False, page="language-format")


if __name__ == "__main__":
    main()
