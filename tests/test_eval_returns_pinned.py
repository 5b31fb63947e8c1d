"""`ad eval` gives the same returns, on the same checkpoint and seed, as main gave at commit df536fc.

``tests/data/main-df536fc/eval_returns.json`` holds the ``returns`` (task x seed x episode) of the AD model and of the
random row, and the mean optimal return, that main's ``ad eval --episodes 4 --seeds 2 --seed 3`` wrote for each
dataset and checkpoint below, on its held-out tasks and on all of them. The DarkRoom pair was written by main at
1ae905f; the Key-to-Door and bandit pairs by main at df536fc::

    ad generate keydoor --size 3 --tasks 6 --heldout-fraction 0.34 --steps-per-task 240 --episode-length 12 \\
        --hidden 16 --out keydoor3
    ad generate bandit --arms 3 --instances 8 --pulls 12 --heldout-fraction 0.25 --out bandit3
    ad train rl --data D --out ad-D --n-layer 1 --n-head 2 --n-embd 16 --n-ff 32 --context 24 --batch-size 4 \\
        --max-steps 3 --threads 1                                           # --context 12 for bandit3
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ad import cli

DATA = Path(__file__).parent / "data"
PINNED = json.loads((DATA / "main-df536fc" / "eval_returns.json").read_text())
PAIRS = {"darkroom": ("main-1ae905f", "darkroom3"), "keydoor": ("main-df536fc", "keydoor3"),
         "bandit": ("main-df536fc", "bandit3")}


@pytest.mark.parametrize("family", sorted(PAIRS))
def test_eval_returns_match_the_ones_main_gave(family, tmp_path):
    folder, name = PAIRS[family]
    shutil.copytree(DATA / folder, tmp_path / folder)  # nothing here touches the committed files
    for split in ("heldout", "all"):
        out = tmp_path / f"eval-{split}"
        assert cli.run(["eval", "--ckpt", str(tmp_path / folder / f"ad-{name}"), "--data",
                        str(tmp_path / folder / name), "--episodes", "4", "--seeds", "2", "--seed", "3", "--split",
                        split, "--threads", "1", "--progress", "false", "--out", str(out)]) == 0
        summary = json.loads((out / "eval.json").read_text())
        want = PINNED[f"{family}-{split}"]
        assert summary["tasks"] == want["tasks"]
        assert summary["optimal_mean_return"] == want["optimal"]
        for policy in ("AD", "random"):
            assert summary["policies"][policy]["returns"] == want[policy], (family, split, policy)
