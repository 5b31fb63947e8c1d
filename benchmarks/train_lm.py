"""Training throughput: `ad train lm --preset scratch` (a Llama from scratch, `words` template) vs
`ad train rl --layout separate` (state, action, reward tokens: the RL format's 3 tokens per transition), on the
same dataset, the same episode subsampling, batch size and (nearly) the same tokens per window (the LM's window of
``--context`` transitions in its preset's template, grid<N> on DarkRoom: 4 tokens a transition, 5 at an episode
start; the RL window gets the transitions that make the same count, 3 tokens each). The LM is built at the
RL-format model's size (2 blocks, width 64, feed-forward 256; the preset's own LM is 4 blocks of width 128) so that
the figure compares the two trainers on equal models.

Each trainer runs twice, interleaved (LM short, RL short, LM long, RL long), through its real `train()` (Lightning,
data loading, checkpoints); tokens/s = (extra steps x batch x tokens per window) / (extra seconds), so set-up
costs cancel. Tokens per LM window are measured on its batches.

    python -m benchmarks.train_lm --data data/demo/darkroom            # ~5-10 min on 2 busy cores
    python -m benchmarks.train_lm --data data/demo/darkroom --quick    # ~1 min
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report, timed  # noqa: E402

from ad.config import make_config  # noqa: E402


def lm_tokens_per_window(data: str, context: int, batch_size: int) -> float:
    """Mean real tokens per window of `ad train lm --preset scratch` on ``data`` (20 batches)."""
    from ad.formats.language import get_template
    from ad.history import HistoryReader
    from models.lm.config import SCRATCH
    from models.lm.data import LMDataModule
    from models.lm.scratch import scratch_tokenizer
    from models.lm.train import resolve_template

    reader = HistoryReader(data)
    template = resolve_template("auto", reader.metadata, SCRATCH)
    datamodule = LMDataModule(reader, scratch_tokenizer(reader, get_template(template)), template, window=context,
                              stride=1, max_tokens=5 * context, batch_size=batch_size, subsample=40,
                              steps_per_epoch=20)
    datamodule.setup()
    return float(np.mean([b["attention_mask"].sum(1).float().mean() for b in datamodule.train_dataloader()]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="data/demo/darkroom", help="DarkRoom dataset (ad generate darkroom)")
    parser.add_argument("--quick", action="store_true", help="few steps (about a minute)")
    parser.add_argument("--batch-size", type=int, default=16, help="windows per step (both trainers)")
    parser.add_argument("--context", type=int, default=80, help="LM window in transitions")
    parser.add_argument("--steps", type=int, nargs=2, default=(20, 220), help="short and long run lengths")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parse_args(parser)
    if args.quick:
        args.steps, args.batch_size = (5, 25), 8
    import torch

    from models.lm.config import TrainLMConfig
    from models.lm.train import train as train_lm
    from models.rl.config import TrainRLConfig
    from models.rl.train import train as train_rl

    torch.set_num_threads(args.threads)
    lm_tokens = lm_tokens_per_window(args.data, args.context, args.batch_size)
    rl_context = int(round(lm_tokens / 3))
    common = {"data": args.data, "batch_size": args.batch_size, "subsample": 40, "threads": args.threads,
              "val_every": 0, "checkpoint_every": 10_000, "progress": False, "warmup_steps": 5}
    seconds: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for steps in args.steps:
            for name, cls, fn, extra in (
                    # the RL-format model's size (the scratch preset's LM is larger), so that the trainers are
                    # compared, not the models
                    ("lm", TrainLMConfig, train_lm, {"preset": "scratch", "context": args.context,
                                                     "max_tokens": 5 * args.context, "watch_every": 0,
                                                     "n_layer": 2, "n_embd": 64, "n_ff": 256}),
                    ("rl", TrainRLConfig, train_rl, {"layout": "separate", "context": rl_context})):
                config = make_config(cls, {**common, **extra, "max_steps": steps, "out": f"{tmp}/{name}{steps}"})
                seconds[(name, steps)], _ = timed(lambda: fn(config))
                print(f"{name} {steps} steps: {seconds[(name, steps)]:.1f}s", flush=True)
    short, long = args.steps
    extra_steps = (long - short) * args.batch_size
    lm_rate = extra_steps * lm_tokens / (seconds[("lm", long)] - seconds[("lm", short)])
    rl_rate = extra_steps * 3 * rl_context / (seconds[("rl", long)] - seconds[("rl", short)])
    print(f"tokens per window: LM {lm_tokens:.1f}, RL separate {3 * rl_context} ({rl_context} transitions)")
    figures = [figure(f"training throughput: ad train lm --preset scratch vs ad train rl --layout separate (batch "
                      f"{args.batch_size}, ~{lm_tokens:.0f} tokens per window, subsample 40; 2 shared CPU cores "
                      "under other agents' load)", "tokens/s", lm_rate, rl_rate, ">= 0.8x")]
    report("train_lm", figures, args.quick, page="language-format")


if __name__ == "__main__":
    main()
