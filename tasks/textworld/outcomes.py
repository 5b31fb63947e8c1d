"""How the games of a TextWorld dataset ended, read back from its history units: per evaluation unit each game's
seed, moves, end ("success", "failed": the game ended it otherwise, "limit": the step limit, "context": a full
transcript ended it early), final normalised score and commands; and the command loops of a game."""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np


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
                   if actions[i] == actions[i + 2] != actions[i + 1] == actions[i + 3])
