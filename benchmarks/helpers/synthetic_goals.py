"""Synthetic learning histories with a known answer, for tests and benchmarks.

The task: each stream has a hidden goal ``g``; in state s the rewarded action is
``(s + g) % num_actions``. The behaviour policy "learns": it takes the rewarded
action with a probability that rises along the stream from ``p_start`` to
``p_end``, else a uniform action. Reward is 1 for the rewarded action. A model
that reads the rewarded transitions in its context can infer g (in-context
learning); the Bayes-optimal action NLL is well below log(num_actions).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def synthetic_stream(length: int, num_states: int, num_actions: int, episode_length: int, goal: int,
                     rng: np.random.Generator, p_start: float = 0.2, p_end: float = 0.95) -> dict[str, np.ndarray]:
    """One stream of ``length`` transitions as RL-format numpy columns (plus episode / terminated / truncated)."""
    t = np.arange(length)
    states = rng.integers(0, num_states, length)
    best = (states + goal) % num_actions
    p = p_start + (p_end - p_start) * t / max(1, length - 1)
    greedy = rng.random(length) < p
    actions = np.where(greedy, best, rng.integers(0, num_actions, length))
    rewards = (actions == best).astype(np.float32)
    probs = np.where(actions == best, p + (1 - p) / num_actions, (1 - p) / num_actions)
    step = t % episode_length
    last = step == episode_length - 1
    return {"states": states.astype(np.int64), "actions": actions.astype(np.int64), "rewards": rewards,
            "logprobs": np.log(probs).astype(np.float32), "timesteps": step.astype(np.int64),
            "episode": (t // episode_length).astype(np.int32), "truncated": last, "terminated": np.zeros(length, bool)}


def synthetic_batches(num_batches: int, batch_size: int, window: int, num_states: int = 9, num_actions: int = 5,
                      episode_length: int = 10, seed: int = 0, stream_length: int = 2000, goal: int | None = None,
                      p_start: float = 0.2, p_end: float = 0.95) -> list[dict[str, Any]]:
    """``num_batches`` RL-format batches (dicts of torch tensors (B, T)) of random windows of synthetic streams.

    ``goal``: None draws a goal per window (in-context task); an int fixes it (a plain state -> action map).
    """
    import torch

    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_batches):
        rows = []
        for _ in range(batch_size):
            g = int(rng.integers(num_actions)) if goal is None else goal
            stream = synthetic_stream(stream_length, num_states, num_actions, episode_length, g, rng, p_start, p_end)
            start = int(rng.integers(0, stream_length - window + 1))
            rows.append({k: stream[k][start:start + window] for k in ("states", "actions", "rewards", "logprobs",
                                                                       "timesteps")})
        batch = {k: torch.from_numpy(np.stack([r[k] for r in rows])) for k in rows[0]}
        batch["mask"] = torch.ones(batch_size, window, dtype=torch.bool)
        batches.append(batch)
    return batches


def write_synthetic_dataset(out: str | Path, num_tasks: int = 5, streams: int = 2, length: int = 400,
                            num_states: int = 9, num_actions: int = 5, episode_length: int = 10,
                            heldout: int = 1, seed: int = 0, nan_rewards: bool = False) -> Path:
    """A small learning-history dataset of the synthetic task (one task per goal), with a held-out split.

    ``nan_rewards`` writes NaN rewards (to test how training handles a non-finite loss).
    """
    from ad.history import ColumnSpec, HistorySpec, HistoryWriter

    rng = np.random.default_rng(seed)
    tasks = [f"synthetic-g{i}" for i in range(num_tasks)]
    spec = HistorySpec(state=ColumnSpec.discrete(num_states), action=ColumnSpec.discrete(num_actions))
    metadata = {"task_spec": {"name": "synthetic", "episode_length": episode_length, "num_states": num_states,
                              "num_actions": num_actions},
                "source": {"algorithm": "synthetic"}, "seeds": [seed],
                "split": {"train": tasks[: num_tasks - heldout], "heldout": tasks[num_tasks - heldout:]},
                "tasks": {name: {"goal": i % num_actions} for i, name in enumerate(tasks)}}
    writer = HistoryWriter(out, spec=spec, family="synthetic", metadata=metadata)
    for i, task in enumerate(tasks):
        with writer.unit(task, 0) as unit:
            for s in range(streams):
                cols = synthetic_stream(length, num_states, num_actions, episode_length, i % num_actions, rng)
                n = length
                if nan_rewards:
                    cols["rewards"] = np.full(n, np.nan, np.float32)
                unit.append({"stream": np.full(n, s, np.int32), "update": np.arange(n, dtype=np.int64) // 10,
                             "episode": cols["episode"], "step": cols["timesteps"].astype(np.int32),
                             "state": cols["states"], "action": cols["actions"], "reward": cols["rewards"],
                             "terminated": cols["terminated"], "truncated": cols["truncated"],
                             "logprob": cols["logprobs"]})
    writer.close()
    return Path(out)
