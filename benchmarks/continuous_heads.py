"""Continuous action heads: the tanh-squashed Gaussian vs bins per dimension, held-out in-context return on the same
Box-action data.

Per seed (a seed draws its own tasks and its own train / held-out split): ``ad generate gym`` records a source
algorithm on every task of a distribution over Pendulum-v1's gravity ``g`` (the script writes the tasks file from
``--task-count``, ``--gravity`` and ``--episode-steps``), then the AD transformer
is trained once per head (``ad train rl --action-head gaussian|bins``, everything else equal) and run in context on
the held-out tasks (``ad eval``, actions sampled from the head, and its greedy action beside).

The figure: the held-out return as a normalised score, ``(return - random) / (source's last episodes - random)``
(0 = uniformly random actions, 1 = the source at the end of its own learning on those tasks), averaged over the
last evaluation episodes and the seeds; ours = the default head (``ADConfig.action_head``), reference = the other.

    python benchmarks/continuous_heads.py --config configs/continuous/continuous_heads.yaml
    python benchmarks/continuous_heads.py --quick      # a tiny version (8-step episodes, a few train steps)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402

HEADS = ("gaussian", "bins")
ENV = "Pendulum-v1"


def write_tasks(args: Any, work: Path) -> Path:
    """The tasks file: ``--task-count`` tasks, gravity drawn uniformly from ``--gravity``, episodes of
    ``--episode-steps`` steps."""
    import yaml

    low, high = args.gravity
    spec = {"sample": {"count": args.task_count, "kwargs": {"g": {"uniform": [low, high]},
                                                             "max_episode_steps": args.episode_steps}}}
    work.mkdir(parents=True, exist_ok=True)
    path = work / "tasks.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def generate(args: Any, tasks: Path, seed: int, out: Path) -> None:
    """Record the source on every task (resumes: units already in ``out`` are skipped)."""
    from ad import cli

    code = cli.run(["generate", "gym", "--env", ENV, "--tasks", str(tasks), "--algo", args.algo,
                    "--algo-kwargs", json.dumps(args.algo_kwargs), "--steps", str(args.steps),
                    "--heldout-fraction", str(args.heldout_fraction), "--seed", str(seed), "--out", str(out),
                    "--no-progress"])
    if code:
        raise SystemExit(f"ad generate gym failed (exit {code})")


def train(args: Any, data: Path, run: Path, head: str, seed: int) -> None:
    """``ad train rl`` with one action head (skipped when ``run`` already holds the saved model)."""
    from ad import cli

    if (run / "model" / "model.safetensors").is_file():
        return
    code = cli.run(["train", "rl", "--data", str(data), "--out", str(run), "--action-head", head,
                    "--action-bins", str(args.action_bins), "--reward-kind", "continuous",
                    "--context", str(args.context), "--batch-size", str(args.batch_size),
                    "--max-steps", str(args.max_steps), "--n-layer", str(args.n_layer), "--n-embd", str(args.n_embd),
                    "--n-head", "4", "--n-ff", str(4 * args.n_embd), "--learning-rate", str(args.learning_rate),
                    "--seed", str(seed),
                    "--val-every", "0", "--checkpoint-every", str(args.max_steps), "--threads", "1",
                    "--progress", "false"])
    if code:
        raise SystemExit(f"ad train rl --action-head {head} failed (exit {code})")


def evaluate(args: Any, data: Path, run: Path, greedy: bool) -> dict[str, Any]:
    """eval.json of ``ad eval`` on the held-out tasks (sampled or greedy actions)."""
    from ad import cli

    out = run / ("eval-greedy" if greedy else "eval")
    if not (out / "eval.json").is_file():
        code = cli.run(["eval", "--ckpt", str(run), "--data", str(data), "--episodes", str(args.episodes),
                        "--seeds", str(args.eval_seeds), "--out", str(out), "--no-progress",
                        *(["--greedy"] if greedy else [])])
        if code:
            raise SystemExit(f"ad eval failed (exit {code})")
    return json.loads((out / "eval.json").read_text())


def source_returns(data: Path, tasks: list[str]) -> Any:
    """The source's whole learning curve on ``tasks``: mean return over tasks per episode."""
    from ad.evaluate import source_curve
    from ad.history import HistoryReader

    return source_curve(HistoryReader(data), tasks, 10**6).curve()[0]


def score(summary: dict[str, Any], source: Any, last: int) -> dict[str, float]:
    """Mean returns over the last ``last`` episodes (the model, random actions, the source's own first and last
    episodes of its whole history on the same tasks) and the normalised score (model - random) / (source last -
    random)."""
    import numpy as np

    rows = summary["policies"]
    model = float(np.mean(rows["AD"]["mean"][-last:]))
    rand = float(np.mean(rows["random"]["mean"][-last:]))
    source_last, source_first = float(np.mean(source[-last:])), float(np.mean(source[:last]))
    return {"return": model, "random": rand, "source_first": source_first, "source_last": source_last,
            "first_episodes": float(np.mean(rows["AD"]["mean"][:last])),
            "score": (model - rand) / (source_last - rand)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny version: 8-step episodes, a few train steps")
    parser.add_argument("--task-count", type=int, default=6, help="tasks (Pendulum-v1 gravities) per seed")
    parser.add_argument("--gravity", type=float, nargs=2, default=[6.0, 14.0], help="range of the gravity g")
    parser.add_argument("--episode-steps", type=int, default=100, help="steps of an episode (max_episode_steps)")
    parser.add_argument("--algo", default="sb3:SAC", help="source algorithm")
    parser.add_argument("--algo-kwargs", type=json.loads, default={}, help="source constructor kwargs (JSON)")
    parser.add_argument("--steps", type=int, default=4500, help="source env steps per task")
    parser.add_argument("--heldout-fraction", type=float, default=0.34, help="tasks held out of training")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds: each draws tasks and a split")
    parser.add_argument("--context", type=int, default=128, help="context of the transformer (transitions)")
    parser.add_argument("--batch-size", type=int, default=8, help="windows per training batch")
    parser.add_argument("--max-steps", type=int, default=2000, help="training steps per head")
    parser.add_argument("--n-layer", type=int, default=2, help="transformer blocks")
    parser.add_argument("--n-embd", type=int, default=64, help="transformer width")
    parser.add_argument("--learning-rate", "--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--action-bins", type=int, default=11, help="bins per action dimension of the bins head")
    parser.add_argument("--episodes", type=int, default=10, help="in-context episodes per held-out env")
    parser.add_argument("--eval-seeds", type=int, default=3, help="envs per held-out task")
    parser.add_argument("--last", type=int, default=3, help="episodes averaged at the end of each curve")
    parser.add_argument("--work", default="data/bench-continuous", help="folder of the datasets and runs")
    args = parse_args(parser)
    work = Path(args.work)
    if args.quick:
        work = work / "quick"
        args.task_count, args.episode_steps = 3, 8
        args.algo_kwargs = {"learning_starts": 16, "batch_size": 8, "policy_kwargs": {"net_arch": [8]}}
        args.steps, args.context, args.max_steps, args.batch_size, args.n_embd = 48, 8, 5, 4, 16
        args.episodes, args.eval_seeds, args.last, args.seeds = 3, 1, 1, [0]
    from models.rl.config import ADConfig

    default = ADConfig.__dataclass_fields__["action_head"].default
    other = next(h for h in HEADS if h != default)
    results: dict[str, dict[str, list[dict[str, float]]]] = {h: {"sampled": [], "greedy": []} for h in HEADS}
    tasks = write_tasks(args, work)
    for seed in args.seeds:
        data = work / f"pendulum-seed{seed}"
        generate(args, tasks, seed, data)
        for head in HEADS:
            run = work / f"run-{head}-seed{seed}"
            train(args, data, run, head, seed)
            for mode, greedy in (("sampled", False), ("greedy", True)):
                summary = evaluate(args, data, run, greedy)
                results[head][mode].append(score(summary, source_returns(data, summary["tasks"]), args.last))
    figures = []
    for mode in ("sampled", "greedy"):
        mean = {h: sum(r["score"] for r in results[h][mode]) / len(results[h][mode]) for h in HEADS}
        fig = figure(f"held-out in-context score of the {default} action head vs the {other} head ({mode} actions), "
                     f"{ENV} x {args.algo}, last {args.last} of {args.episodes} episodes, "
                     f"seeds {' '.join(map(str, args.seeds))}", "(return - random) / (source last - random)",
                     mean[default], mean[other], "ratio >= 1 (the default head is the better one)")
        fig["per_seed"] = {h: results[h][mode] for h in HEADS}
        if mode == "sampled" and not args.quick:
            fig.update(headline=True, short=f"Continuous action head: {default} vs {other}, held-out {ENV}",
                       vs=f"{other} head")
        figures.append(fig)
    report("continuous_heads", figures, args.quick, capability="Continuous (Box) actions: RL-format model + ad eval",
           page="continuous")


if __name__ == "__main__":
    main()
