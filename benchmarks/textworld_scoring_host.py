"""Host-side cost of TextWorld acting: moves/s of greedy play with a tiny random LM (its compute is ~0, so what is
timed is tokenising, building the candidates' prefix tree, masks, gathers and the games), this checkout against
another revision of the repository (a temporary git worktree), windowed and transcript prompts, the same games;
the two sides run in alternating subprocesses. On a GPU this host side is what limits batched acting.

    python benchmarks/textworld_scoring_host.py --baseline-rev HEAD~1 [--games 32] [--moves 16] [--repeats 2]
    python benchmarks/textworld_scoring_host.py --quick     # 4 games, 3 moves, 1 repeat

Results: benchmarks/results/textworld_scoring_host.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.common import figure, report  # noqa: E402

#: What each subprocess runs with its tree first on sys.path: JSON {side: moves/s, side_actions: [...]}.
CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch
from ad.lm.pretrained import load_base
from benchmarks.helpers.tiny_lm import build_tiny
from tasks.textworld.games import GameOptions
from tasks.textworld.policy import TextWorldPolicy
from tasks.textworld.rollouts import fold_games, play

torch.set_num_threads(1)
torch.manual_seed(0)
model, tok = load_base(str(build_tiny(Path(tempfile.mkdtemp()) / "tiny", width=32, max_positions=16384)))
games, moves = int(sys.argv[2]), int(sys.argv[3])
options = GameOptions(step_limit=moves)
chosen = fold_games(options, "test", games, 0)
out = {}
for name, policy, history, pinned in (
        ("windowed", TextWorldPolicy(model, tok, max_prompt_tokens=512, batch=games), 1, ["read cookbook"]),
        ("transcript", TextWorldPolicy(model, tok, max_prompt_tokens=256 * max(moves, 32), batch=games,
                                       transcript=True), moves, [])):
    start = time.perf_counter()
    episodes = play(policy, chosen, options, history, pinned=pinned)
    out[name] = sum(len(e) for e in episodes) / (time.perf_counter() - start)
    out[name + "_actions"] = [e.actions for e in episodes]
print(json.dumps(out))
"""


def measure(tree: Path, games: int, moves: int) -> dict[str, Any]:
    """One subprocess run of :data:`CHILD` on ``tree``."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(games), str(moves)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-rev", default="HEAD", help="git revision to compare this checkout against")
    parser.add_argument("--games", type=int, default=32, help="games played together")
    parser.add_argument("--moves", type=int, default=16, help="step limit of each game")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each side (median taken)")
    parser.add_argument("--quick", action="store_true", help="4 games, 3 moves, 1 repeat")
    args = parser.parse_args()
    games, moves, repeats = (4, 3, 1) if args.quick else (args.games, args.moves, args.repeats)
    base = Path(tempfile.mkdtemp()) / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline_rev],
                   check=True)
    try:
        rates: dict[str, dict[str, list[float]]] = {"ours": {}, "baseline": {}}
        actions: dict[str, Any] = {}
        for r in range(repeats):
            sides = [("ours", ROOT), ("baseline", base)]
            for name, tree in sides if r % 2 == 0 else sides[::-1]:  # alternate who goes first
                result = measure(tree, games, moves)
                for prompt in ("windowed", "transcript"):
                    rates[name].setdefault(prompt, []).append(result[prompt])
                actions[name] = result
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    figures = []
    for prompt in ("windowed", "transcript"):
        same = actions["ours"][f"{prompt}_actions"] == actions["baseline"][f"{prompt}_actions"]
        fig = figure(f"host-side acting cost, {prompt} prompts: this checkout / {args.baseline_rev} ({games} games in "
                     f"one batch, {moves} moves, greedy, tiny random LM, 1 thread, median of {repeats} alternating "
                     f"runs; same moves: {same})", "moves/s", float(np.median(rates["ours"][prompt])),
                     float(np.median(rates["baseline"][prompt])), "faster, same moves")
        figures.append(fig)
    report("textworld_scoring_host", figures, args.quick, page="textworld")


if __name__ == "__main__":
    main()
