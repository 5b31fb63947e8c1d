"""Overhead of logging every GRPO completion: step time of trl's GRPOTrainer with vs without the history writer.

Both sides run the same LoggingGRPOTrainer settings on the same prompts; "reference" has no rollout log (it is
then exactly trl's GRPOTrainer step), "ours" logs every completion (behaviour logprobs captured from trl's own
loss pass, Parquet commit every chunk). Sides alternate (A B A B) and the faster repeat of each is kept.

    python benchmarks/rlhf_logging.py --quick     # tiny random LM, < 1 min
    python benchmarks/rlhf_logging.py             # SmolLM2-135M-Instruct, default sizes, a few steps (slow on CPU)
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import figure, parse_args, report  # noqa: E402


def run_side(cfg, logging: bool, workdir: Path) -> float:
    """Seconds per training iteration of one fresh trainer (model load and first step excluded)."""
    from transformers import TrainerCallback

    from ad.history import HistoryWriter
    from ad.lm.pretrained import load_base
    from tasks.rlhf.generate import build_trainer
    from tasks.rlhf.prompts import load_prompts, split_prompts
    from tasks.rlhf.reward import checked_reward, load_reward
    from tasks.rlhf.rollouts import SPEC, RolloutLog
    from tasks.trl_runs.callbacks import ChunkCallback

    train, _ = split_prompts(load_prompts(cfg.prompts), cfg.heldout_fraction, cfg.seed)
    model, tokenizer = load_base(cfg.model)
    ref = {}
    reward = checked_reward(load_reward(cfg.reward), cfg.reward, lambda *b: ref["t"].scored(*b), lambda: "bench")
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            times.append(time.perf_counter() - self.t0)

    callbacks = [Clock()]
    log = None
    if logging:
        out = workdir / f"d{time.perf_counter_ns()}"
        log = RolloutLog(HistoryWriter(str(out), SPEC, "rlhf", {}), run=0, num_generations=cfg.num_generations)
        callbacks.insert(0, ChunkCallback(log, cfg.chunk_steps, lambda c, r: None))
    trainer = build_trainer(cfg, model, tokenizer, train, reward, log, workdir / "ckpt", callbacks)
    ref["t"] = trainer
    trainer.train()
    if logging:
        assert log.rows_logged == cfg.max_steps * cfg.completions_per_step
    steady = times[1:] or times
    return sum(steady) / len(steady)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny random LM, < 1 minute")
    parser.add_argument("--steps", type=int, default=0, help="iterations per side (default: 8 quick, 3 full)")
    parser.add_argument("--threads", type=int, default=2)
    args = parse_args(parser)

    import torch

    from ad.config import make_config
    from tasks.rlhf.config import GenerateConfig

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.quick:
            from benchmarks.helpers.tiny_lm import build_tiny

            model = str(build_tiny(workdir / "tiny", n_layer=2, width=64, heads=2))
        else:
            model = "smollm2-135m"
        steps = args.steps or (8 if args.quick else 3)
        cfg = make_config(GenerateConfig, dict(out=str(workdir / "unused"), model=model, max_steps=steps,
                                               chunk_steps=max(1, steps // 3), progress=False, tensorboard=False,
                                               plots=False, eval_prompts=0))
        sides = {"with": [], "without": []}
        for _ in range(2):  # A B A B, keep the faster repeat of each
            sides["without"].append(run_side(cfg, False, workdir))
            sides["with"].append(run_side(cfg, True, workdir))
    ours, reference = min(sides["with"]), min(sides["without"])
    print(f"step time without log: {sides['without']}, with log: {sides['with']}")
    report("rlhf_logging", [
        figure(f"GRPO step time, {cfg.completions_per_step} completions x {cfg.max_new_tokens} tokens "
               f"({'tiny LM' if args.quick else 'SmolLM2-135M + LoRA'}), with history log vs trl alone",
               "s/step", ours, reference, "ratio <= 1.05", higher_is_better=False),
    ], args.quick, page="rlhf")


if __name__ == "__main__":
    main()
