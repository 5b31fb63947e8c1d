"""How the games of a TextWorld dataset ended, read back from its history units: per evaluation unit each game's
seed, moves, end ("success", "failed": the game ended it otherwise, "limit": the step limit, "context": a full
transcript ended it early), final normalised score and commands; the command loops of a game; a policy's agreement
with the gold path, move by move."""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

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


def paired(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    """Two phases' outcomes on the same games (matched by ``game_seed``; e.g. after SFT and after PPO): successes
    of both, of one only, of neither; McNemar's exact two-sided p-value on the games only one of them won (is the
    change in success more than chance, given the games?); the mean score change and in how many games the score
    rose or fell. ValueError if the two sets hold different games."""
    from math import comb

    a = {g["game_seed"]: g for g in before}
    b = {g["game_seed"]: g for g in after}
    if set(a) != set(b):
        raise ValueError(f"the two phases played different games ({len(set(a) ^ set(b))} not in both)")
    won = [(a[s]["end"] == "success", b[s]["end"] == "success") for s in a]
    only_before, only_after = sum(x and not y for x, y in won), sum(y and not x for x, y in won)
    n, k = only_before + only_after, min(only_before, only_after)
    p = min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0
    delta = [b[s]["score"] - a[s]["score"] for s in a]
    return {"games": len(a), "both": sum(x and y for x, y in won), "before_only": only_before,
            "after_only": only_after, "neither": sum(not x and not y for x, y in won), "mcnemar_p": p,
            "score_change": float(np.mean(delta)) if delta else float("nan"),
            "score_rose": sum(d > 1e-9 for d in delta), "score_fell": sum(d < -1e-9 for d in delta)}


def move_accuracy(policy: Any, demos: Sequence[Any]) -> dict[str, float]:
    """Teacher-forced agreement with the gold path: at every demonstrated move (the gold prompt and the game's
    valid commands), does the greedy policy pick the gold command? ``accuracy`` is over moves, ``all_moves`` the
    share of games whose every move it gets right. Cheap next to playing (one scoring pass per move, no env), and
    it bounds play: a game of n moves is won greedily only if, off the gold path or on it, every move is right.
    The games advance in lockstep, move by move, as in :func:`tasks.textworld.rollouts.play` (so a transcript policy can cache them)."""
    if any(len(ep.valid_actions) != len(ep) for ep in demos):
        raise ValueError("demonstrations without their valid commands (gold_demonstrations records them)")
    hits = [[False] * len(ep) for ep in demos]
    policy.begin()
    for t in range(max((len(ep) for ep in demos), default=0)):
        active = [i for i, ep in enumerate(demos) if len(ep) > t]
        choices = policy.act([demos[i].prompts[t] for i in active], [demos[i].valid_actions[t] for i in active],
                             greedy=True, keys=active)
        for i, choice in zip(active, choices):
            hits[i][t] = choice.action == demos[i].actions[t]
    flat = [h for game in hits for h in game]
    return {"moves": len(flat), "accuracy": float(np.mean(flat)) if flat else float("nan"),
            "all_moves": float(np.mean([all(game) for game in hits])) if hits else float("nan")}
