"""Prompt files: one prompt per line, and the deterministic train / held-out split."""
from __future__ import annotations

import numpy as np

from ad.errors import UserError
from ad.files import check_input_file, read_utf8


def load_prompts(path: str) -> list[str]:
    """Non-empty, non-comment lines of ``path``, unique, in file order (UserError if there are none)."""
    file = check_input_file(path, "prompt file", "pass --prompts <text file, one prompt per line>")
    lines = [line.strip() for line in read_utf8(file, f"--prompts {path}").splitlines()]
    prompts = list(dict.fromkeys(line for line in lines if line and not line.startswith("#")))
    if len(prompts) < 2:
        raise UserError(f"prompt file {file} holds {len(prompts)} prompt(s); it needs at least 2 (one to train on, "
                        "one held out), one per line")
    return prompts


def split_prompts(prompts: list[str], heldout_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """(train, held-out) prompts: a seeded random ``heldout_fraction`` held out (at least one of each)."""
    order = np.random.default_rng(seed).permutation(len(prompts))
    k = min(max(1, int(round(len(prompts) * heldout_fraction))), len(prompts) - 1)
    heldout = sorted(order[:k].tolist())
    train = sorted(order[k:].tolist())
    return [prompts[i] for i in train], [prompts[i] for i in heldout]
