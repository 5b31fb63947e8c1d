"""AD training in bfloat16 mixed precision against float32, side by side in one process, on Meta-World histories.

``ad train rl --precision bf16-mixed`` runs each step under ``torch.autocast`` (bfloat16 matrix products, float32
weights, AdamW and attention); the reference is the same model, batches and optimiser settings in float32 (the
default, ``--precision 32-true``, with the fused AdamW). The model is the Meta-World demo's AD (Gaussian head,
context 320, batch 16, 2 blocks of width 64) on a small dataset of the search source generated here; both models
start from the same weights and train on the same windows, the timing alternating short chunks of steps between them
so that machine noise hits both alike.

Figures: optimiser steps/s (bf16-mixed vs float32) and the action NLL of each model on windows drawn afresh after
the same steps (bfloat16 rounding must not cost the fit).

    python benchmarks/train_precision.py --config configs/metaworld/train_precision.yaml
    python benchmarks/train_precision.py --quick    # a few steps, under a minute
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few steps (under a minute)")
    parser.add_argument("--steps", type=int, default=300, help="optimiser steps of each model")
    parser.add_argument("--chunk", type=int, default=25, help="steps of one model before the other takes its turn")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    return parse_args(parser)


def histories(folder: Path) -> Path:
    """A small Meta-World reach dataset of the search source (4 training goals x 2 runs, 10 episodes of 80 steps)."""
    from ad.config import make_config
    from tasks.metaworld.config import GenerateConfig
    from tasks.metaworld.generate import generate

    out = folder / "metaworld"
    generate(make_config(GenerateConfig, {"source": "search", "search_memory": "mean", "train_goals": "0-3",
                                          "heldout_goals": "", "runs": 2, "episodes": 10, "episode_length": 80,
                                          "out": str(out), "progress": False}, source="benchmark options"))
    return out


def windows(data: Path) -> tuple[Any, Any]:
    """(the demo's `ad train rl` config resolved on ``data``, its training data module)."""
    from ad.config import make_config
    from ad.distributed.sampling import ShardedRLDataModule
    from models.rl.config import TrainRLConfig
    from models.rl.train import resolve_data_sizes, state_statistics

    config = make_config(TrainRLConfig, {"data": str(data), "out": str(data.parent / "run"), "context": 320,
                                         "batch_size": 16, "action_head": "gaussian", "reward_kind": "continuous",
                                         "state_weight": 0.0, "reward_weight": 0.0, "attn_dropout": 0.0,
                                         "resid_dropout": 0.1, "history_start_share": 0.4}, source="benchmark")
    datamodule = ShardedRLDataModule(config.data, window=config.context, batch_size=config.batch_size, subsample=1,
                                     expert_only=False, optimal_targets=False, posterior_targets=False,
                                     val_batches=config.val_batches, num_workers=0, seed=0,
                                     history_start_share=config.history_start_share)
    datamodule.setup()
    config = dataclasses.replace(config, **resolve_data_sizes(config, datamodule.spec, datamodule.metadata))
    return dataclasses.replace(config, **state_statistics(config, datamodule.train_set)), datamodule


#: How far bf16-mixed's action NLL may lie from float32's after the same steps (nats).
NLL_TOLERANCE = 0.05


def trainee(name: str, config: Any, bf16: bool) -> Any:
    """The demo's AD from seed 0 with its AdamW (the kernel ``ad train rl`` picks for the precision)."""
    import torch

    from benchmarks.helpers.trainee import Trainee
    from models.rl.config import model_config_of
    from models.rl.model import ADTransformer
    from models.training import adamw_kwargs_for

    torch.manual_seed(0)
    model = ADTransformer(model_config_of(config))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, betas=(config.beta1, config.beta2),
                                  **adamw_kwargs_for(name))
    return Trainee(name, model, optimizer, config.grad_clip, bf16=bf16)


def main(args: argparse.Namespace) -> None:
    import torch

    from ad.config.groups import cpu_has_fast_bfloat16

    torch.set_num_threads(args.threads)
    steps, chunk = (12, 4) if args.quick else (args.steps, args.chunk)
    print(f"torch {torch.__version__}, {args.threads} threads, CPU bfloat16 in hardware: {cpu_has_fast_bfloat16()}")
    with tempfile.TemporaryDirectory() as tmp:
        config, datamodule = windows(histories(Path(tmp)))
        loader = iter(datamodule.train_dataloader())
        batches = [next(loader) for _ in range(steps + 2)]
        fresh = [next(loader) for _ in range(4 if args.quick else 16)]
    trainees = {name: trainee(name, config, bf16=name == "bf16-mixed") for name in ("bf16-mixed", "32-true")}
    for t in trainees.values():  # warm-up (allocator, kernels) outside the timing
        t.run(batches[:2])
        t.reset_clock()
    done = 0
    while done < steps:
        part = batches[2 + done:2 + min(done + chunk, steps)]
        for t in trainees.values():
            t.run(part)
        done += len(part)
        print(f"  {done}/{steps} steps  " + "  ".join(f"{name} {t.steps / t.seconds:.2f} steps/s"
                                                      for name, t in trainees.items()), flush=True)
    ours, reference = trainees["bf16-mixed"], trainees["32-true"]
    shape = (f"Meta-World demo AD (Gaussian head, {config.n_layer}x{config.n_embd}, context {config.context}, batch "
             f"{config.batch_size}), {args.threads} thread{'s' if args.threads > 1 else ''}")
    fit = figure(f"action NLL on fresh windows after {steps} steps, bf16-mixed vs 32-true, {shape}", "nats",
                 ours.nll(fresh), reference.nll(fresh), f"within {NLL_TOLERANCE} nats of 32-true",
                 higher_is_better=False)
    fit["met"] = "yes" if abs(fit["ours"] - fit["reference"]) <= NLL_TOLERANCE else "no"
    figures = [figure(f"AD optimiser steps/s, --precision bf16-mixed vs 32-true, {shape}", "steps/s",
                      ours.steps / ours.seconds, reference.steps / reference.seconds,
                      ">= 1.2x (reference: 32-true; on a CPU with AVX512-BF16 or AMX)"), fit]
    report("train_precision", figures, args.quick, capability="AD transformer training speed",
           page="models-and-evaluation")


if __name__ == "__main__":
    main(options())
