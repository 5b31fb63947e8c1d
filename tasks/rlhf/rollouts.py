"""Every completion GRPO generates, buffered per chunk of training iterations and committed as one history unit.

Row layout (one row = one completion = a one-step episode):
  state = prompt text, action = completion text, reward, logprob = per-token log-probabilities of the completion
  under the behaviour policy, update = training iteration that generated it, stream = position in its
  generation group (0..G-1), episode = index of the row within its stream, step = 0, terminated = the
  completion ended with EOS, truncated = it hit the token limit. Extra: advantage, prompt_ids, completion_ids.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.history import ColumnSpec, HistorySpec, HistoryWriter

SPEC = HistorySpec(state=ColumnSpec.text(), action=ColumnSpec.text(), logprob="per_token",
                   extra={"advantage": "float32", "prompt_ids": "list<int32>", "completion_ids": "list<int32>"})


def chunk_task(chunk: int) -> str:
    """Task name of the unit that holds training iterations of chunk ``chunk``."""
    return f"sentiment-c{chunk:04d}"


class RolloutLog:
    """Collects generation batches of the current chunk; :meth:`commit` writes them as one unit."""

    def __init__(self, writer: HistoryWriter, run: int, num_generations: int) -> None:
        self.writer, self.run, self.G = writer, run, num_generations
        self._batches: list[dict[str, Any]] = []
        self.rows_logged = 0

    def add(self, update: int, prompts: list[str], completions: list[str], rewards: list[float],
            prompt_ids: list[list[int]], completion_ids: list[list[int]], logprobs: list[np.ndarray],
            advantages: np.ndarray, terminated: np.ndarray) -> None:
        """Buffer one generation batch (n rows, grouped G by G as trl orders them)."""
        n = len(completions)
        if not (len(prompts) == len(rewards) == len(prompt_ids) == len(completion_ids) == len(logprobs)
                == len(advantages) == n):
            raise RuntimeError(f"rollout batch columns disagree in length at update {update}")
        self._batches.append({"update": update, "prompts": prompts, "completions": completions,
                              "rewards": np.asarray(rewards, np.float32), "prompt_ids": prompt_ids,
                              "completion_ids": completion_ids, "logprobs": logprobs,
                              "advantages": np.asarray(advantages, np.float32),
                              "terminated": np.asarray(terminated, bool)})

    @property
    def pending_rows(self) -> int:
        return sum(len(b["completions"]) for b in self._batches)

    def columns(self) -> dict[str, Any]:
        """The buffered rows as one history column batch (rows in generation order)."""
        cols: dict[str, list] = {k: [] for k in ("stream", "update", "episode", "state", "action", "reward",
                                                 "terminated", "logprob", "advantage", "prompt_ids",
                                                 "completion_ids")}
        episodes = np.zeros(self.G, np.int64)  # next episode index of each stream
        for b in self._batches:
            n = len(b["completions"])
            stream = np.arange(n) % self.G  # (n,) position in the generation group
            cols["stream"].append(stream)
            cols["update"].append(np.full(n, b["update"], np.int64))
            cols["episode"].append(episodes[stream] + np.arange(n) // self.G)
            episodes += n // self.G
            cols["state"] += b["prompts"]
            cols["action"] += b["completions"]
            cols["reward"].append(b["rewards"])
            cols["terminated"].append(b["terminated"])
            cols["logprob"] += [np.asarray(lp, np.float32) for lp in b["logprobs"]]
            cols["advantage"].append(b["advantages"])
            cols["prompt_ids"] += [list(map(int, ids)) for ids in b["prompt_ids"]]
            cols["completion_ids"] += [list(map(int, ids)) for ids in b["completion_ids"]]
        out: dict[str, Any] = {k: (np.concatenate(cols[k]) if cols[k] else np.zeros(0))
                               for k in ("stream", "update", "episode", "reward", "terminated", "advantage")}
        out["stream"] = out["stream"].astype(np.int32)
        out["episode"] = out["episode"].astype(np.int32)
        out["update"] = out["update"].astype(np.int64)
        out["terminated"] = out["terminated"].astype(bool)
        out["truncated"] = ~out["terminated"]
        out["step"] = np.zeros(len(out["stream"]), np.int32)
        for k in ("state", "action", "logprob", "prompt_ids", "completion_ids"):
            out[k] = cols[k]
        return out

    def commit(self, chunk: int, info: dict[str, Any]) -> int:
        """Write the buffered rows as unit ``chunk`` (atomically) and clear the buffer; returns the row count."""
        cols = self.columns()
        rows = len(cols["stream"])
        unit = self.writer.open_unit(chunk_task(chunk), self.run)
        try:
            unit.append(cols)
            unit.commit(info={**info, "rows": rows})
        except BaseException:
            unit.abort()
            raise
        self._batches.clear()
        self.rows_logged += rows
        return rows
