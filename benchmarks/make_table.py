"""Regenerate the tables of BENCHMARKS.md from benchmarks/results/*.json (the figures as measured).

    python benchmarks/make_table.py > /tmp/tables.md
"""
from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)


def main() -> None:
    for path in sorted(RESULTS.glob("*.json")):
        if path.stem.endswith("_quick"):
            continue
        figures = json.loads(path.read_text())
        print(f"### {path.stem}\n")
        print(f"`{figures[0]['command']}` ({figures[0]['date']})\n")
        print("| figure | unit | ours | reference | ratio | goal |\n|---|---|---|---|---|---|")
        for f in figures:
            ratio = "-" if f.get("ratio") is None else f"{f['ratio']:.2f}x"
            print(f"| {f['figure']} | {f['unit']} | {fmt(f['ours'])} | {fmt(f['reference'])} | {ratio} | {f['goal']} |")
        print()


if __name__ == "__main__":
    main()
