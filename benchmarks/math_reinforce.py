"""Math word problems: held-out greedy accuracy of the policy before vs after ``ad generate math`` (REINFORCE with a
KL to a reference refreshed every k iterations, and with the refresh off: k = infinity), on two seeds (each seed
holds out different story templates), plus the cost of logging every solution per training step.

    python benchmarks/math_reinforce.py --quick            # tiny random LM, a few iterations (< 1 min): checks the pipeline
    python benchmarks/math_reinforce.py --threads 2        # SmolLM2-135M-Instruct + LoRA, the default run, seeds 0 and 1

"reference" of an accuracy figure is the base policy's accuracy on the same held-out problems, "ours" the trained
policy's; answers with no number at all (format failures) are reported apart from wrong numbers. The overhead
figure runs the same trainer with and without the history log, alternating, fastest repeat kept.
(Issue #16 names this script ``benchmarks/math.py``: a ``math.py`` in this folder would shadow Python's own ``math``
module for every ``python benchmarks/<name>.py``, numpy's import included. Results keep the name ``math.json``.)
Parts of the work can run in separate processes (``--seeds 1 --variants norefresh --json part.json``) and be
merged (``--merge part*.json``).
"""
from __future__ import annotations

import os
import sys

# run as a script, this file's folder comes first on sys.path, where "math" would shadow the standard library's
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse
import json
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import figure, parse_args, report  # noqa: E402

VARIANTS = {"refresh": {"refresh": True}, "norefresh": {"refresh": False}}


def make_cfg(args: argparse.Namespace, seed: int, out: Path, **extra):
    """The GenerateConfig of one run of the benchmark."""
    from ad.config import make_config
    from tasks.math.config import GenerateConfig

    opts = dict(out=str(out), model=args.model, seed=seed, threads=args.threads, eval_problems=0, plots=False,
                progress=not args.quiet, level=args.level)
    if args.quick:
        opts.update(max_steps=4, chunk_steps=2, num_generations=2, problems_per_step=2, max_new_tokens=8,
                    ref_refresh=2)
    if args.max_steps:
        opts["max_steps"] = args.max_steps
    if args.ref_refresh:
        opts["ref_refresh"] = args.ref_refresh
    opts.update(parse_options(args.option))
    opts.update(extra)
    return make_config(GenerateConfig, opts, source="benchmark options")


def parse_options(pairs: list[str]) -> dict:
    """``--option KEY=VALUE`` pairs as GenerateConfig overrides (text values: ``make_config`` converts and checks
    them against the option types, as for the command line)."""
    opts = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--option needs KEY=VALUE, got {pair!r}")
        opts[key.replace("-", "_")] = value
    return opts


def heldout_accuracy(args: argparse.Namespace, seed: int, checkpoint: Path | None) -> dict:
    """Greedy accuracy on the seed's held-out problems of the base policy (``checkpoint=None``) or a trained one."""
    import torch

    from ad.lm.pretrained import load_base
    from tasks.math.evaluate import evaluate_policy
    from tasks.math.generate import load_split
    from tasks.math.prompts import render_prompt
    from tasks.trl_runs.checkpoints import load_policy

    cfg = make_cfg(args, seed, Path("unused"), eval_problems=args.eval_problems)
    split = load_split(cfg)
    model, tokenizer = load_base(cfg.model)
    if torch.cuda.is_available():
        model = model.cuda()
    if checkpoint is not None:
        model = load_policy(model, str(checkpoint), cfg.lora)
    heldout = split["heldout"][:cfg.eval_problems]
    prompts = [render_prompt(tokenizer, p.question, split["shots"]) for p in heldout]
    return evaluate_policy(model, tokenizer, heldout, prompts, cfg.max_new_tokens, f"seed {seed} held-out",
                           not args.quiet)


def train(args: argparse.Namespace, seed: int, variant: str, work: Path) -> tuple[Path, float]:
    """Run ``ad generate math`` (no evaluation inside); (final checkpoint, training seconds)."""
    from tasks.math.generate import generate

    out = work / f"s{seed}-{variant}"
    cfg = make_cfg(args, seed, out, **VARIANTS[variant])
    start = time.perf_counter()
    generate(cfg)
    seconds = time.perf_counter() - start
    return out / "_run" / "checkpoints" / f"checkpoint-{cfg.max_steps}", seconds


def step_time(args: argparse.Namespace, logging: bool, work: Path, steps: int) -> float:
    """Seconds per training iteration (first excluded) of a fresh trainer with or without the history log."""
    from transformers import TrainerCallback

    from ad.history import HistoryWriter
    from ad.lm.pretrained import load_base
    from tasks.math.generate import build_trainer, load_split, reward_function, training_rows
    from tasks.math.rollouts import SPEC, MathRolloutLog

    cfg = make_cfg(args, 0, work / "unused", max_steps=steps)
    model, tokenizer = load_base(cfg.model)
    split = load_split(cfg)
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            times.append(time.perf_counter() - self.t0)

    on_batch, callbacks = None, [Clock()]
    if logging:
        from tasks.trl_runs.callbacks import ChunkCallback

        log = MathRolloutLog(HistoryWriter(str(work / f"log{time.perf_counter_ns()}"), SPEC, "math", {}), 0,
                             cfg.num_generations, {tokenizer.eos_token_id})
        on_batch = log.add
        callbacks.insert(0, ChunkCallback(log, cfg.chunk_steps, lambda c, r: None))
    ref: dict = {}
    rows = training_rows(cfg, tokenizer, split["train"], split["shots"])
    trainer = build_trainer(cfg, model, tokenizer, rows, reward_function(ref, cfg.format_reward), on_batch,
                            work / f"ckpt{time.perf_counter_ns()}", callbacks)
    ref["trainer"] = trainer
    trainer.train()
    steady = times[1:] or times
    return sum(steady) / len(steady)


def run(args: argparse.Namespace) -> list[dict]:
    """Every requested measurement, as benchmark figures."""
    import platform

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.machine()})"
    note = (f"{device}; CPU shared with other jobs (timings under load)" if not torch.cuda.is_available()
            else device)
    figures: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        for seed in args.seeds:
            before = heldout_accuracy(args, seed, None)
            print(f"seed {seed} base policy: accuracy {before['accuracy']:.3f}, wrong {before['wrong']:.3f}, format "
                  f"failures {before['format_failures']:.3f}, marked {before['marked']:.3f} "
                  f"({before['problems']} problems)", flush=True)
            for variant in args.variants:
                if args.checkpoint:  # evaluate a saved checkpoint (e.g. of a run stopped early) instead of training
                    checkpoint, seconds = Path(args.checkpoint), float("nan")
                else:
                    checkpoint, seconds = train(args, seed, variant, work)
                after = heldout_accuracy(args, seed, checkpoint)
                k = "k = infinity (no refresh)" if variant == "norefresh" else \
                    f"k = {make_cfg(args, seed, work).ref_refresh}"
                fig = figure(f"held-out accuracy, seed {seed}, reference refresh {k} "
                             f"({before['problems']} problems, greedy)", "fraction correct",
                             after["accuracy"], before["accuracy"], "after - before >= +0.15")
                fig.update(seed=seed, variant=variant, train_seconds=round(seconds, 1), device=note,
                           format_failures={"before": before["format_failures"], "after": after["format_failures"]},
                           wrong={"before": before["wrong"], "after": after["wrong"]},
                           marked={"before": before["marked"], "after": after["marked"]},
                           lift=after["accuracy"] - before["accuracy"],
                           settings={k2: v for k2, v in vars(make_cfg(args, seed, work)).items()
                                     if k2 in ("level", "max_steps", "num_generations", "problems_per_step",
                                               "max_new_tokens", "learning_rate", "beta", "ref_refresh", "model",
                                               "temperature", "format_reward", "few_shot", "lora_r")},
                           checkpoint=checkpoint.name,
                           samples_after=after["samples"][:2])
                figures.append(fig)
                print(f"seed {seed} {variant}: {before['accuracy']:.3f} -> {after['accuracy']:.3f} "
                      f"(format failures {before['format_failures']:.3f} -> {after['format_failures']:.3f}; "
                      f"train {seconds:.0f}s)", flush=True)
        if args.overhead_steps:
            sides = {True: [], False: []}
            for _ in range(2):  # A B A B, fastest repeat of each side
                for logging in (False, True):
                    sides[logging].append(step_time(args, logging, work, args.overhead_steps))
            fig = figure("RLOO step time with the history log vs without (same trainer)", "s/step",
                         min(sides[True]), min(sides[False]), "ratio <= 1.05", higher_is_better=False)
            fig.update(device=note, repeats={"with_log": sides[True], "without": sides[False]})
            figures.append(fig)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny random LM, a few iterations (< 1 min)")
    parser.add_argument("--model", default="", help="base LM (default smollm2-135m; --quick: a tiny random LM)")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1],
                        help="seeds of the accuracy figures (none: only the overhead figure)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--max-steps", "--iterations", dest="max_steps", type=int,
                        default=0, help="override the default run's iterations")
    parser.add_argument("--ref-refresh", type=int, default=0, help="override the default run's refresh period k")
    parser.add_argument("--eval-problems", type=int, default=200)
    parser.add_argument("--overhead-steps", type=int, default=4, help="iterations per side of the overhead figure "
                                                                      "(0 = skip)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="override an `ad generate math` option of the trained runs (repeatable), e.g. "
                             "--option num_generations=8 --option format_reward=0.1")
    parser.add_argument("--work", default="", help="keep run folders (checkpoints, histories) here instead of a "
                                                   "temporary folder")
    parser.add_argument("--checkpoint", default="", help="evaluate this saved checkpoint of the one --seeds / "
                                                         "--variants given instead of training")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--json", default="", help="write the figures to this file instead of benchmarks/results")
    parser.add_argument("--merge", nargs="+", default=[], help="merge figure files written with --json")
    parser.add_argument("--name", default="math", help="results file name (benchmarks/results/<name>.json)")
    args = parse_args(parser)
    if args.checkpoint and (len(args.seeds) != 1 or len(args.variants) != 1):
        parser.error("--checkpoint evaluates one run: give exactly one --seeds and one --variants")
    if args.merge:
        figures = [fig for path in args.merge for fig in json.loads(Path(path).read_text())]
        report(args.name, figures, quick=False, page="math")
        return
    if args.quick:
        args.eval_problems = min(args.eval_problems, 16)
        if not args.model:
            from benchmarks.helpers.tiny_lm import build_tiny

            args.model = str(build_tiny(Path(tempfile.mkdtemp()) / "tiny", n_layer=1, width=32))
    args.model = args.model or "smollm2-135m"
    from ad.errors import UserError

    try:  # bad --option values: one line now, not a traceback after minutes of work
        make_cfg(args, 0, Path("unused"))
    except UserError as err:
        parser.error(str(err))
    figures = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    else:
        report(args.name, figures, quick=args.quick, page="math")


if __name__ == "__main__":
    main()
