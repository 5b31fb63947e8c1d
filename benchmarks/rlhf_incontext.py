"""Closing the loop: does an LM trained on RLHF rollouts (``ad train lm --data data/rlhf --template rollout``) write
higher-reward completions for held-out prompts when its context holds k *late* (prompt, completion, reward)
blocks of the RLHF run than when it holds k *early* ones?

    python benchmarks/rlhf_incontext.py --data data/rlhf --ckpt runs/lm-rlhf [--k 4 --prompts 32]
    python benchmarks/rlhf_incontext.py --quick        # tiny random LM on a tiny generated run (pipeline check only)
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import figure, parse_args, report  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/rlhf")
    parser.add_argument("--ckpt", default="runs/lm-rlhf")
    parser.add_argument("--k", type=int, default=4, help="context blocks")
    parser.add_argument("--prompts", type=int, default=32, help="held-out prompts")
    parser.add_argument("--fraction", type=float, default=0.2, help="early = first, late = last fraction of updates")
    parser.add_argument("--quick", action="store_true")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402


def incontext_reward(data: str, ckpt: str, k: int, n_prompts: int, fraction: float, seed: int) -> dict[str, float]:
    """Mean reward of one sampled completion per held-out prompt, after k early / late blocks of context."""
    from ad.formats.language import get_template
    from ad.history import HistoryReader
    from models.lm.loader import load_model
    from tasks.rlhf.evaluate import sample_completions
    from tasks.rlhf.reward import load_reward

    reader = HistoryReader(data)
    meta = reader.metadata
    reward_fn = load_reward(meta["task_spec"]["reward"])
    max_new = int(meta["task_spec"]["max_new_tokens"])
    table = reader.table(columns=["update", "state", "action", "reward"]).to_pydict()
    update = np.asarray(table["update"])
    lo, hi = np.quantile(update, fraction), np.quantile(update, 1 - fraction)
    model, tokenizer, _ = load_model(ckpt)
    template = get_template("rollout")
    prompts = meta["prompts"]["heldout"][:n_prompts]
    rng = np.random.default_rng(seed)
    out = {}
    for name, pool in (("early", np.flatnonzero(update <= lo)), ("late", np.flatnonzero(update >= hi))):
        texts = []
        for p in prompts:
            idx = rng.choice(pool, size=k, replace=len(pool) < k)
            rows = {c: [table[c][i] for i in idx] for c in ("state", "action", "reward")}
            texts.append(template.render(rows) + template.prompt({"state": p, "action": "", "reward": 0.0}))
        raw = sample_completions(model, tokenizer, texts, max_new, 1.0, seed)
        completions = [template.parse_action(c) for c in raw]
        out[name] = float(np.mean(reward_fn(prompts=prompts, completions=completions)))
        out[f"{name}_context_reward"] = float(np.mean([table["reward"][i] for i in pool]))
    return out


def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if args.quick:  # a tiny generated run + 3 LM steps: checks the pipeline, the figure means nothing
            from benchmarks.helpers.tiny_lm import build_tiny

            tiny = str(build_tiny(Path(tmp) / "tiny"))
            args.data, args.ckpt, args.prompts = f"{tmp}/d", f"{tmp}/lm", 8
            py = [sys.executable, "-m", "ad"]
            subprocess.run(py + ["generate", "rlhf", "--out", args.data, "--model", tiny, "--max-steps", "6",
                                 "--chunk-steps", "3", "--num-generations", "4", "--max-new-tokens", "8",
                                 "--eval-prompts", "0", "--progress", "false"], check=True, capture_output=True)
            subprocess.run(py + ["train", "lm", "--data", args.data, "--out", args.ckpt, "--model", tiny,
                                 "--template", "rollout", "--max-steps", "3"], check=True, capture_output=True)
        res = incontext_reward(args.data, args.ckpt, args.k, args.prompts, args.fraction, seed=0)
    print(res)
    report("rlhf_incontext", [
        figure(f"held-out reward of the trained LM's completion after k={args.k} late vs early rollout blocks",
               "mean reward", res["late"], res["early"], "ratio > 1 (late context earns more)"),
    ], args.quick, page="rlhf")


if __name__ == "__main__":
    main(ARGS)
