"""Where one training iteration of ``ad generate math`` spends its time on a CPU, split into sampling, reference
(log-probability passes), update and logging, for the trl engine (``--engine trl``, trl's RLOOTrainer: the
"before") and the batched engine (``--engine fast``, the ``cpu`` preset: the "after"), same model, problems, batch
and lengths.

    python benchmarks/math_iteration.py --config configs/math/iteration.yaml   # SmolLM2-135M, 2 problems x 8 x 96
    python benchmarks/math_iteration.py --quick                                # a tiny random LM (under a minute)

The engines run alternately (trl, fast, trl, fast ...), ``--max-steps`` iterations each time, the first iteration
of each run not counted; the figure is the median seconds per iteration of each side. On a machine shared with other
jobs, read the ratio (both sides measured under the same load) rather than the seconds.

How the trl engine's time is split (without touching trl): ``sampling`` = time inside the policy's ``generate``;
``reference`` = forward passes without gradients outside ``generate`` (trl's policy and reference scoring passes);
``logging`` = the reward function (which hands the batch to the history log) and the unit commits; ``update`` =
the rest of the optimiser step (the forward and backward pass with gradients, the optimiser).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# run as a script, this file's folder comes first on sys.path, where math_*.py names are harmless, but keep the
# same rule as benchmarks/math_reinforce.py (no shadowing of the standard library)
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import figure, parse_args, report  # noqa: E402

PHASES = ("sampling", "reference", "update", "logging")
#: The headline-page row these figures belong to (the math task's).
CAPABILITY = "Math word problems with RLOO (ad generate math)"


def make_cfg(args: argparse.Namespace, engine: str, out: Path):
    """The GenerateConfig of one profiled run (the trl engine trains in float32 whatever ``--dtype`` says)."""
    from ad.config import make_config
    from tasks.math.config import GenerateConfig

    dtype = engine_dtype(args, engine)
    return make_config(GenerateConfig, dict(
        out=str(out), model=args.model, engine=engine, dtype=dtype, max_steps=args.max_steps,
        chunk_steps=args.max_steps, problems_per_step=args.problems_per_step, num_generations=args.num_generations,
        max_new_tokens=args.max_new_tokens, eval_problems=0, plots=False, progress=False, threads=args.threads,
        seed=0, ref_refresh=max(args.ref_refresh, 1), refresh=args.ref_refresh > 0), source="benchmark options")


def engine_dtype(args: argparse.Namespace, engine: str) -> str:
    """The weights' dtype an engine runs with: ``--dtype`` resolved for the batched engine, float32 for trl."""
    from benchmarks.common import resolve_dtype

    return "float32" if engine == "trl" else str(resolve_dtype(args.dtype)).removeprefix("torch.")


def profile_trl(cfg) -> list[dict[str, float]]:
    """Per-iteration phase seconds of a trl-engine run of ``cfg``."""
    import torch
    from transformers import TrainerCallback

    from ad.history import HistoryWriter
    from ad.lm.pretrained import load_base
    from tasks.math.generate import build_trainer, load_split, reward_function, training_rows
    from tasks.math.rollouts import SPEC, MathRolloutLog
    from tasks.trl_runs.callbacks import ChunkCallback

    model, tokenizer = load_base(cfg.model, cfg.dtype)
    split = load_split(cfg)
    log = MathRolloutLog(HistoryWriter(cfg.out, SPEC, "math", {}), 0, cfg.num_generations, {tokenizer.eos_token_id})
    spent = {k: 0.0 for k in PHASES}
    state = {"in_generate": False, "forward_start": 0.0}
    steps: list[dict[str, float]] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            spent.update({key: 0.0 for key in PHASES})
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            total = time.perf_counter() - self.t0
            steps.append({**spent, "update": total - spent["sampling"] - spent["reference"] - spent["logging"]})

    class Commits(ChunkCallback):  # the unit commit counted as logging
        def on_save(self, *a, **k):
            start = time.perf_counter()
            out = super().on_save(*a, **k)
            if steps:
                steps[-1]["logging"] += time.perf_counter() - start
            return out

    ref: dict = {}
    reward = reward_function(ref, cfg.format_reward)

    def timed_reward(*a, **k):
        start = time.perf_counter()
        try:
            return reward(*a, **k)
        finally:
            spent["logging"] += time.perf_counter() - start

    timed_reward.__name__ = "correctness"
    trainer = build_trainer(cfg, model, tokenizer, training_rows(cfg, tokenizer, split["train"], split["shots"]),
                            timed_reward, log.add, Path(cfg.out) / "ckpt",
                            [Commits(log, cfg.chunk_steps, lambda c, r: None), Clock()])
    ref["trainer"] = trainer
    policy = trainer.model
    generate = policy.generate

    def timed_generate(*a, **k):
        start, state["in_generate"] = time.perf_counter(), True
        try:
            return generate(*a, **k)
        finally:
            state["in_generate"] = False
            spent["sampling"] += time.perf_counter() - start

    policy.generate = timed_generate  # an attribute of this instance only

    def before(_m, _a):
        state["forward_start"] = time.perf_counter()

    def after(_m, _a, _o):
        if not state["in_generate"] and not torch.is_grad_enabled():
            spent["reference"] += time.perf_counter() - state["forward_start"]

    handles = [policy.register_forward_pre_hook(before), policy.register_forward_hook(after)]
    if trainer.ref_model is not None:
        handles += [trainer.ref_model.register_forward_pre_hook(before), trainer.ref_model.register_forward_hook(after)]
    trainer.train()
    for h in handles:
        h.remove()
    return steps


def profile_fast(cfg) -> list[dict[str, float]]:
    """Per-iteration phase seconds of a fast-engine run of ``cfg``."""
    from ad.history import HistoryWriter
    from ad.lm.pretrained import load_base
    from tasks.math import reinforce
    from tasks.math.generate import load_split
    from tasks.math.rollouts import SPEC, MathRolloutLog

    model, tokenizer = load_base(cfg.model, cfg.dtype)
    split = load_split(cfg)
    log = MathRolloutLog(HistoryWriter(cfg.out, SPEC, "math", {}), 0, cfg.num_generations,
                         reinforce.eos_ids(model, tokenizer))
    _, timings = reinforce.train(cfg, model, tokenizer, split["train"], split["shots"], log,
                                 Path(cfg.out) / "ckpt", None, lambda c, r: None)
    return [{k: timings[k][i] for k in PHASES} for i in range(len(timings["sampling"]))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny random LM, small sizes (under a minute)")
    parser.add_argument("--model", default="smollm2-135m", help="base LM (ad.lm.pretrained.load_base name or folder)")
    parser.add_argument("--problems-per-step", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--ref-refresh", type=int, default=0, help="refresh period k (0 = no refresh: the reference "
                                                                   "pass runs every iteration)")
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    parser.add_argument("--max-steps", "--iterations", dest="max_steps", type=int,
                        default=2, help="iterations per run (the first not counted)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each engine")
    parser.add_argument("--engines", nargs="+", default=["trl", "fast"], choices=["trl", "fast"])
    parser.add_argument("--threads", type=int, default=2)
    args = parse_args(parser)
    import torch

    torch.set_num_threads(args.threads)
    if args.quick:
        from benchmarks.helpers.tiny_lm import build_tiny

        args.model = str(build_tiny(Path(tempfile.mkdtemp()) / "tiny", n_layer=2, width=64))
        args.max_new_tokens, args.repeats = min(args.max_new_tokens, 16), 1
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict[str, float]]] = {e: [] for e in args.engines}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for engine in args.engines:
                cfg = make_cfg(args, engine, Path(tmp) / f"{engine}{repeat}")
                steps = (profile_trl if engine == "trl" else profile_fast)(cfg)
                counted = steps[1:] or steps
                runs[engine] += counted
                print(f"repeat {repeat} {engine}: " + ", ".join(
                    f"{k} {statistics.median(s[k] for s in counted):.1f}s" for k in PHASES), flush=True)
    split = {e: {k: round(statistics.median(s[k] for s in steps), 3) for k in PHASES} for e, steps in runs.items()}
    totals = {e: round(statistics.median(sum(s[k] for k in PHASES) for s in steps), 3) for e, steps in runs.items()}
    solutions = args.problems_per_step * args.num_generations
    name = (f"math iteration time, {solutions} solutions ({args.problems_per_step} problems x {args.num_generations}) "
            f"x <= {args.max_new_tokens} tokens: batched engine vs trl RLOOTrainer")
    if len(totals) == 2:
        fig = figure(name, "s/iteration", totals["fast"], totals["trl"], "lower; split recorded",
                     higher_is_better=False)
    else:
        (engine, total), = totals.items()
        fig = figure(f"{name} ({engine} only)", "s/iteration", total, None, "split recorded", higher_is_better=False)
    fig.update(phases=split, iterations=runs, threads=args.threads, dtype=args.dtype,
               dtypes={e: engine_dtype(args, e) for e in args.engines}, load_average_before=round(load_before, 2),
               note="engines alternated in one process, first iteration of each run not counted, medians; "
                    "load_average_before: the machine's 1-minute load average when the run started")
    report("math_iteration", [fig], quick=args.quick, page="math",
           capability=CAPABILITY)


if __name__ == "__main__":
    main()
