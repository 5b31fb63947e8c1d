"""SimPO optimiser-step time on grid-world preference pairs: the shared-prefix trainer (the prompts' common opening
run once per batch) vs trl's CPOTrainer (loss_type="simpo"), same model (SmolLM2-135M + LoRA r16), same pairs,
same batch, side by side. Both compute the same loss (tests/test_gridworld_generate.py checks loss and gradients).

    python benchmarks/gridworld_simpo_step.py [--quick] [--batch 16] [--steps 4]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, lm_parser, parse_args, report, timed  # noqa: E402


def main() -> None:
    parser = lm_parser(__doc__, "2 steps each (< 1.5 min)")
    parser.add_argument("--batch", type=int, default=16, help="pairs per optimiser step")
    parser.add_argument("--steps", type=int, default=4, help="timed optimiser steps per trainer")
    args = parse_args(parser)
    steps = 2 if args.quick else args.steps

    from peft import LoraConfig, get_peft_model

    from ad.lm.pretrained import load_base
    from tasks.gridworld.actor import all_move_lists
    from tasks.gridworld.env import split_configs
    from tasks.gridworld.prompts import moves_text
    from tasks.gridworld.rollouts import Rewards
    from tasks.gridworld.shared_prefix_simpo import train_shared_prefix_simpo
    from tasks.gridworld.simpo import make_optimizer, train_simpo

    model, tok = load_base(args.model)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                             target_modules="all-linear"))
    rewards, lists = Rewards(size=4, state_text="egocentric"), all_move_lists(4)
    train, _ = split_configs(4, 0.2, 0)
    pairs = [{"prompt": rewards.prompt(c), "chosen": moves_text(lists[i % 12]), "rejected": moves_text(lists[-1 - i])}
             for i, c in enumerate(train[:args.batch * (steps + 1)])]
    warm, timed_pairs = pairs[:args.batch], pairs[args.batch:]
    optimizer = make_optimizer(model, 1e-4)
    common = dict(beta=2.0, gamma=0.5, epochs=1, batch=args.batch, seed=0, nll=1.0)
    with tempfile.TemporaryDirectory() as tmp:
        train_simpo(model, tok, warm, tmp, lr=1e-4, progress=False, optimizer=optimizer, **common)  # warm-up
        t_trl, _ = timed(lambda: train_simpo(model, tok, timed_pairs, tmp, lr=1e-4, progress=False,
                                             optimizer=optimizer, **common))
    train_shared_prefix_simpo(model, tok, warm, optimizer, **common)  # warm-up
    t_ours, _ = timed(lambda: train_shared_prefix_simpo(model, tok, timed_pairs, optimizer, **common))
    print(f"{steps} steps of {args.batch} pairs: shared-prefix {t_ours:.1f}s, trl CPOTrainer {t_trl:.1f}s")
    report("gridworld_simpo_step", [figure(f"SimPO optimiser steps/s, {args.batch} pairs per step, SmolLM2-135M + "
                                           "LoRA: shared-prefix trainer vs trl CPOTrainer", "steps/s",
                                           steps / t_ours, steps / t_trl, "faster")], args.quick, page="gridworld")


if __name__ == "__main__":
    main()
