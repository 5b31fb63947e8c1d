"""How the games of ``ad generate textworld`` datasets ended: per evaluation unit (base / sft / ppo, test and train
folds) the count of successes, failures (the game ended it: a wrong cut or cooking, eating too early), games at the
step limit and games whose transcript filled the context; the commands that ended failed games; the command pairs
repeated most in games that ran to the limit (loops); each phase against the one before on the same games (base ->
sft -> ppo, per fold: games won by both, by one only, McNemar's exact p, the score change). Per-game outcomes go to
a JSON file for closer reading.

    python benchmarks/textworld_games.py DATASET [DATASET ...] [--json games.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.helpers.textworld_outcomes import game_outcomes, loops, paired  # noqa: E402


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
        for first, second in (("base", "sft"), ("sft", "ppo")):
            for name in sorted(n for n in units if n.startswith(f"{second}-")):
                earlier = name.replace(f"{second}-", f"{first}-", 1)
                if earlier in units:
                    c = paired(units[earlier], units[name])
                    print(f"{dataset} {earlier} -> {name}: won by both {c['both']}, {first} only {c['before_only']}, "
                          f"{second} only {c['after_only']}, neither {c['neither']} (McNemar exact p "
                          f"{c['mcnemar_p']:.3g}); score {c['score_change']:+.3f} (rose in {c['score_rose']}, fell "
                          f"in {c['score_fell']} of {c['games']})")
    if args.json:
        Path(args.json).write_text(json.dumps(everything))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
