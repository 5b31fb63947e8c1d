"""Finish ``ad generate textworld``'s figures from adapters brought back from another machine.

A GPU session's time budget can stop a run after PPO but before the after-PPO evaluation; the run's folder is too
large to bring back, its adapters are not (~10 MB each in bfloat16). ``export`` writes them (device side, see
``benchmarks/device/run.sh``); ``evaluate`` plays the run's evaluation games greedily here with the SFT policy and
the PPO policy on top of it (the same game draws: pass the run's options, any ``--dtype``), into a new dataset with
the units sft-test / sft-train / ppo-test / ppo-train, so both are measured on the same machine and precision; then
``benchmarks/textworld_games.py OUT`` gives the paired SFT -> PPO counts and ``benchmarks/textworld.py --parts
learning --recorded --out DIR`` the figures (base: not recorded there).

    python benchmarks/textworld_saved.py export RUN_DIR DEST [--dtype bfloat16]
    python benchmarks/textworld_saved.py evaluate --sft DEST/sft-adapter.safetensors [--ppo DEST/ppo-adapter...] \\
        --out data/tw-saved/seed0 --seed 0 --dtype float32 --transcript --max-prompt-tokens 8192 --step-limit 32 ...
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    """Run ``export`` or ``evaluate``; exit code 2 with one line for bad input."""
    from ad.errors import UserError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="a run folder's adapters as small safetensors files")
    export.add_argument("run_dir", type=Path, help="the run folder (<out>/_run of ad generate textworld)")
    export.add_argument("dest", type=Path, help="folder to write sft-adapter.safetensors / ppo-adapter.safetensors")
    export.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"),
                        help="precision of the written weights (bfloat16: half the size)")
    evaluate = sub.add_parser("evaluate", help="greedy play with exported adapters (other options: those of "
                                               "`ad generate textworld`, as in the run that trained them)")
    evaluate.add_argument("--sft", type=Path, required=True, help="sft-adapter.safetensors")
    evaluate.add_argument("--ppo", type=Path, help="ppo-adapter.safetensors (omit: the SFT policy only)")
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "export":
            if rest:
                parser.error(f"unrecognized arguments: {' '.join(rest)}")
            from benchmarks.helpers.textworld_saved import export_adapters

            for name, path in export_adapters(args.run_dir, args.dest, args.dtype).items():
                print(f"{name}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
            return 0
        from ad.config import parse_config
        from tasks.textworld.config import GenerateConfig
        from benchmarks.helpers.textworld_saved import evaluate_saved

        cfg = parse_config(GenerateConfig, rest, prog="textworld_saved.py evaluate")
        results = evaluate_saved(cfg, args.sft, args.ppo)
        for name, info in results.items():
            print(f"{name}: success {info['success']:.3f}, mean normalised score {info['score']:.3f} "
                  f"({info['games']} games)")
        return 0
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
