"""Episodes of B grid worlds stepped in lockstep by one batched actor call per turn, and their history rows.

One row = one turn = one move list: state = the actor's prompt, action = the move-list text, per-token logprob,
terminated (goal or off map), truncated (turn limit), stream = env slot, step = turn, update = policy version
(0 = base actor; SimPO iteration k trains update k + 1); extra columns phase, success, off_map and mc_return
(discounted return from this turn on).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ad.lm.agents import Actor
from ad.history import ColumnSpec, HistorySpec, HistoryWriter
from tasks.gridworld.env import apply_moves
from tasks.gridworld.prompts import make_prompt

SPEC = HistorySpec(state=ColumnSpec.text(), action=ColumnSpec.text(), logprob="per_token",
                   extra={"phase": "string", "success": "bool", "off_map": "bool", "mc_return": "float32"})


@dataclass
class Rewards:
    """Settings of the env (same meaning as GridWorldEnv's arguments, ``state_text`` = its ``text_style``)."""

    size: int = 4
    clip_at_wall: bool = False
    goal_reward: float = 1.0
    move_cost: float = 0.01
    offmap_penalty: float = 1.0
    state_text: str = "absolute"

    def prompt(self, config: Sequence[int]) -> str:
        """The actor's prompt for a config (``x, y, orientation, goal_x, goal_y``)."""
        return make_prompt(self.size, config, self.state_text)

    def outcome(self, config: Sequence[int], moves: Sequence[int]) -> tuple[tuple[int, ...], float, bool, bool]:
        """(next config, reward, success, off_map) of one move list (the env's step, without the env object)."""
        (x, y, o), executed, success, off = apply_moves(self.size, config, moves, self.clip_at_wall)
        reward = -self.move_cost * executed + self.goal_reward * success - self.offmap_penalty * off
        return (x, y, o, config[3], config[4]), reward, success, off


@dataclass
class Episodes:
    """Turn rows of a batch of episodes, in time order per stream."""

    rows: dict[str, list] = field(default_factory=lambda: {k: [] for k in (
        "stream", "episode", "step", "state", "action", "logprob", "reward", "terminated", "truncated", "success",
        "off_map", "config")})
    outcomes: list[tuple[bool, bool]] = field(default_factory=list)  #: per episode (success, off_map)

    def success_rate(self) -> float:
        return float(np.mean([s for s, _ in self.outcomes])) if self.outcomes else float("nan")

    def offmap_rate(self) -> float:
        return float(np.mean([o for _, o in self.outcomes])) if self.outcomes else float("nan")


def run_episodes(actor: Actor, rewards: Rewards, starts: Sequence[Sequence[int]], max_turns: int,
                 greedy: bool = False, batch: int | None = None, episode_offset: int = 0) -> Episodes:
    """Play one episode from each start config in ``batch`` env slots (default: all at once), one batched actor
    call per turn; a slot whose episode ends takes the next start at once. Rows: stream = slot, episode =
    ``episode_offset`` + the slot's episode count; ``outcomes`` follow the order of ``starts``."""
    out = Episodes()
    batch = max(1, min(batch or len(starts), len(starts)))
    queue = iter(range(len(starts)))
    result = [(False, False)] * len(starts)
    slots: list[dict[str, Any] | None] = [None] * batch
    episodes_in = [0] * batch

    def refill(s: int) -> None:
        index = next(queue, None)
        slots[s] = None if index is None else {"index": index, "state": tuple(int(v) for v in starts[index]),
                                               "turn": 0, "episode": episode_offset + episodes_in[s]}
        episodes_in[s] += index is not None

    for s in range(batch):
        refill(s)
    while any(slot is not None for slot in slots):
        active = [s for s in range(batch) if slots[s] is not None]
        prompts = [rewards.prompt(slots[s]["state"]) for s in active]
        acted = actor.act(prompts, greedy=greedy)
        for j, s in enumerate(active):
            slot = slots[s]
            nxt, r, success, off = rewards.outcome(slot["state"], acted.actions[j])
            term = success or off
            trunc = not term and slot["turn"] == max_turns - 1
            for key, value in (("stream", s), ("episode", slot["episode"]), ("step", slot["turn"]),
                               ("state", prompts[j]), ("action", acted.texts[j]), ("logprob", acted.logprobs[j]),
                               ("reward", r), ("terminated", term), ("truncated", trunc), ("success", success),
                               ("off_map", off), ("config", slot["state"])):
                out.rows[key].append(value)
            slot["state"], slot["turn"] = nxt, slot["turn"] + 1
            if term:
                result[slot["index"]] = (success, off)
            if term or trunc:
                refill(s)
    out.outcomes += result
    return out


def mc_returns(ep: Episodes, gamma: float) -> np.ndarray:
    """Discounted return from each row on, within its episode (rows are grouped by stream/episode)."""
    rewards = np.asarray(ep.rows["reward"], np.float64)
    keys = list(zip(ep.rows["stream"], ep.rows["episode"]))
    steps = np.asarray(ep.rows["step"])
    out = np.zeros(len(rewards))
    by_episode: dict[tuple[int, int], list[int]] = {}
    for i, k in enumerate(keys):
        by_episode.setdefault(k, []).append(i)
    for idx in by_episode.values():
        idx = sorted(idx, key=lambda i: steps[i])
        g = 0.0
        for i in reversed(idx):
            g = rewards[i] + gamma * g
            out[i] = g
    return out


def commit_episodes(writer: HistoryWriter, task: str, run: int, ep: Episodes, phase: str | list[str], update: int,
                    gamma: float, info: dict[str, Any]) -> int:
    """Write a batch of episodes as one unit (atomically); rows sorted by (stream, episode, step). ``phase``: one
    name for every row or one per row."""
    n = len(ep.rows["reward"])
    order = sorted(range(n), key=lambda i: (ep.rows["stream"][i], ep.rows["episode"][i], ep.rows["step"][i]))
    ret = mc_returns(ep, gamma)
    take = lambda key, dtype=None: np.asarray([ep.rows[key][i] for i in order], dtype)  # noqa: E731
    cols = {"stream": take("stream", np.int32), "update": np.full(n, update, np.int64),
            "episode": take("episode", np.int32), "step": take("step", np.int32),
            "state": [ep.rows["state"][i] for i in order], "action": [ep.rows["action"][i] for i in order],
            "reward": take("reward", np.float32), "terminated": take("terminated", bool),
            "truncated": take("truncated", bool), "logprob": [ep.rows["logprob"][i] for i in order],
            "phase": [phase] * n if isinstance(phase, str) else [phase[i] for i in order],
            "success": take("success", bool), "off_map": take("off_map", bool),
            "mc_return": ret[order].astype(np.float32)}
    with writer.unit(task, run) as unit:
        unit.append(cols)
        unit.commit(info={**info, "rows": n, "episodes": len(ep.outcomes), "success_rate": ep.success_rate(),
                          "offmap_rate": ep.offmap_rate()})
    return n


def concat(*parts: Episodes) -> Episodes:
    """One Episodes holding the rows and outcomes of all parts (streams must not collide)."""
    out = Episodes()
    for ep in parts:
        for k in out.rows:
            out.rows[k] += ep.rows[k]
        out.outcomes += ep.outcomes
    return out
