"""Probe for #17 (DarkRoom robustness): a source whose histories explore systematically instead of A2C's random walks.

The source ("nearest-unvisited explorer", an R-max-like optimistic agent that knows the grid's deterministic moves):
each stream keeps the set of cells it has stepped on, across episodes. Until it has been rewarded at the goal it walks
to the nearest cell it has not visited (Manhattan distance, random ties, the target kept until reached); after that it
walks to the goal and stays. Each action is replaced by a uniformly random one with probability ``--epsilon`` before
the goal is found and ``--epsilon-after-goal`` after. Every episode starts in the centre, as in ``ad demo``.

The dataset gets exactly the metadata ``ad generate darkroom --size N --seed S --no-terminate-on-goal`` writes (task
spec, train / held-out split, optimal returns), so ``ad train rl`` and ``ad eval`` run on it unchanged:

    python benchmarks/darkroom_explorer_probe.py --size 11 --seed 0 --out data/explorer11-s0
    ad train rl --data data/explorer11-s0 --out runs/explorer11-s0 --context 200 --subsample 1 --max-steps 4000 \
        --batch-size 32 --seed 0 --threads 1
    ad eval --ckpt runs/explorer11-s0 --data data/explorer11-s0 --episodes 60 --seeds 3 --seed 0

Prints the source's own return / optimal (all goals) at episodes 1-5, 6-10 and 36-40.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COLUMNS = ("stream", "update", "episode", "step", "state", "action", "reward", "terminated", "truncated", "logprob")


def explore(size: int, goal: int, start: int, streams: int, episodes: int, horizon: int, epsilon: float,
            epsilon_after_goal: float, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """History columns (stream-major, time-ordered) of ``streams`` explorers on one goal cell, and their returns
    (streams, episodes)."""
    from tasks.darkroom.goals import transition_table

    S = size * size
    next_cell = transition_table(size)  # (S, A)
    rows, cols = np.divmod(np.arange(S), size)
    dist = np.abs(rows[:, None] - rows[None]) + np.abs(cols[:, None] - cols[None])  # (S, S) Manhattan
    visited = np.zeros((streams, S), bool)
    found = np.zeros(streams, bool)
    target = np.full(streams, -1)
    out = {name: np.zeros((streams, episodes, horizon), np.float64) for name in COLUMNS}
    returns = np.zeros((streams, episodes))
    for e in range(episodes):
        cell = np.full(streams, start)
        visited[:, start] = True
        for t in range(horizon):
            action = np.zeros(streams, np.int64)
            for k in range(streams):
                if found[k]:
                    target[k] = goal
                elif target[k] < 0 or visited[k, target[k]]:
                    d = np.where(visited[k], 10**6, dist[cell[k]]) + 0.5 * rng.random(S)  # random ties
                    target[k] = int(np.argmin(d))
                if cell[k] != target[k]:
                    closer = [a for a in range(1, 5) if dist[next_cell[cell[k], a], target[k]] < dist[cell[k], target[k]]]
                    action[k] = closer[rng.integers(len(closer))]
            noisy = rng.random(streams) < np.where(found, epsilon_after_goal, epsilon)
            action = np.where(noisy, rng.integers(0, 5, streams), action)
            new = next_cell[cell, action]
            reward = (new == goal).astype(np.float64)
            found |= reward > 0
            visited[np.arange(streams), new] = True
            for name, value in (("stream", np.arange(streams)), ("update", e), ("episode", e), ("step", t),
                                ("state", cell), ("action", action), ("reward", reward), ("truncated", t == horizon - 1),
                                ("logprob", np.nan)):
                out[name][:, e, t] = value
            returns[:, e] += reward
            cell = new
    types = {"stream": np.int32, "update": np.int64, "episode": np.int32, "step": np.int32, "state": np.int16,
             "action": np.int8, "reward": np.float32, "terminated": bool, "truncated": bool, "logprob": np.float32}
    return {name: out[name].reshape(-1).astype(types[name]) for name in COLUMNS}, returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=9, help="DarkRoom side length")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split (as `ad generate`) and the explorer")
    parser.add_argument("--out", required=True, help="dataset folder to write")
    parser.add_argument("--streams", type=int, default=10, help="explorer histories per goal")
    parser.add_argument("--episodes", type=int, default=60, help="episodes per history")
    parser.add_argument("--epsilon", type=float, default=0.1, help="random-action probability before the goal is found")
    parser.add_argument("--epsilon-after-goal", type=float, default=0.02, help="the same after")
    args = parser.parse_args()
    from ad.config import make_config
    from ad.history import ColumnSpec, HistorySpec, HistoryWriter
    from tasks.darkroom.config import GenerateConfig
    from tasks.darkroom.generate import dataset_metadata
    from tasks.darkroom.goals import all_goals

    cfg = make_config(GenerateConfig, {"size": args.size, "seed": args.seed, "out": args.out,
                                       "terminate_on_goal": False})
    metadata = dataset_metadata(cfg, all_goals(args.size))
    metadata["source"] = {"algorithm": "nearest-unvisited explorer",
                          "implementation": "benchmarks.darkroom_explorer_probe.explore",
                          "config": {k: v for k, v in vars(args).items() if k != "out"}}
    spec = metadata["task_spec"]
    start = spec["start"][0] * args.size + spec["start"][1]
    rng = np.random.default_rng(args.seed)
    writer = HistoryWriter(args.out, spec=HistorySpec(state=ColumnSpec.discrete(args.size ** 2),
                                                      action=ColumnSpec.discrete(5), logprob="scalar"),
                           family="darkroom", metadata=metadata)
    normalised = []
    try:
        for task in metadata["split"]["train"] + metadata["split"]["heldout"]:
            row, col = metadata["tasks"][task]["goal"]
            columns, returns = explore(args.size, row * args.size + col, start, args.streams, args.episodes,
                                       spec["episode_length"], args.epsilon, args.epsilon_after_goal, rng)
            unit = writer.open_unit(task, args.seed)
            unit.append(columns)
            unit.commit(info={})
            normalised.append(returns.mean(0) / metadata["tasks"][task]["optimal_return"])
    finally:
        writer.close()
    curve = np.mean(normalised, axis=0)
    print(f"explorer on {len(normalised)} goals of a {args.size}x{args.size} room: return / optimal at episodes 1-5 "
          f"{curve[:5].mean():.2f}, 6-10 {curve[5:10].mean():.2f}, 36-40 {curve[35:40].mean():.2f} -> {args.out}")


if __name__ == "__main__":
    main()
