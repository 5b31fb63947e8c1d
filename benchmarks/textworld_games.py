"""How the games of ``ad generate textworld`` datasets ended: per evaluation unit (base / sft / ppo, test and train
folds) the count of successes, failures (the game ended it: a wrong cut or cooking, eating too early), games at the
step limit and games whose transcript filled the context; the commands that ended failed games; the command pairs
repeated most in games that ran to the limit (loops). Per-game outcomes go to a JSON file for closer reading.

    python benchmarks/textworld_games.py DATASET [DATASET ...] [--json games.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def game_outcomes(dataset: str) -> dict[str, list[dict[str, Any]]]:
    """Per evaluation unit (``<phase>-<fold>``), each game's seed, moves, end, final score and commands."""
    from ad.history import HistoryReader, Location

    reader = HistoryReader(Location.of(dataset))
    step_limit = reader.metadata.get("source", {}).get("config", {}).get("step_limit")
    out: dict[str, list[dict[str, Any]]] = {}
    for unit in reader.units():
        name = unit["task"]
        if not name.endswith(("-test", "-train")):
            continue
        for stream in reader.iter_unit_streams(unit, ["episode", "action", "terminated", "truncated", "game_seed",
                                                      "score"]):
            cols = stream.columns
            episode = np.asarray(cols["episode"])
            for e in np.unique(episode):
                rows = np.flatnonzero(episode == e)
                last = rows[-1]
                score = float(cols["score"][last])
                if bool(cols["terminated"][last]):
                    end = "success" if score >= 1.0 - 1e-6 else "failed"
                else:
                    end = "limit" if step_limit is None or len(rows) >= step_limit else "context"
                out.setdefault(f"{name} (run {unit['run']})", []).append(
                    {"game_seed": int(cols["game_seed"][last]), "moves": len(rows), "end": end, "score": score,
                     "actions": [str(cols["action"][r]) for r in rows]})
    return out


def loops(actions: list[str]) -> Counter:
    """Consecutive command pairs that come back (a, b, a, b): the pair, counted per repeat."""
    return Counter(tuple(sorted(actions[i:i + 2])) for i in range(len(actions) - 3)
                   if actions[i] == actions[i + 2] and actions[i + 1] == actions[i + 3] and actions[i] != actions[i + 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+", help="ad generate textworld output folders")
    parser.add_argument("--json", help="write every game's outcome here")
    args = parser.parse_args()
    everything: dict[str, Any] = {}
    for dataset in args.datasets:
        units = game_outcomes(dataset)
        everything[dataset] = units
        for name, games in sorted(units.items()):
            ends = Counter(g["end"] for g in games)
            print(f"{dataset} {name}: {len(games)} games, " + ", ".join(f"{k} {ends.get(k, 0)}" for k in
                                                                        ("success", "failed", "limit", "context")))
            failing = Counter(g["actions"][-1] for g in games if g["end"] == "failed").most_common(5)
            if failing:
                print("    failed on: " + "; ".join(f"{a!r} x{n}" for a, n in failing))
            looping = sum((loops(g["actions"]) for g in games if g["end"] == "limit"), Counter()).most_common(5)
            if looping:
                print("    loops at the limit: " + "; ".join(f"{' / '.join(p)} x{n}" for p, n in looping))
    if args.json:
        Path(args.json).write_text(json.dumps(everything))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
