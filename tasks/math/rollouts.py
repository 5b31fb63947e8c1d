"""Every solution RLOO samples, buffered per chunk of training iterations and committed as one history unit.

Row layout (one row = one sampled solution = a one-step episode):
  state = the problem text (the env's observation), action = the solution text, reward (1 correct, 0 not, plus
  the format reward), logprob = per-token log-probabilities of the solution under the behaviour policy,
  update = training iteration that sampled it, stream = position in its group of ``num_generations``,
  episode = update x problems per iteration + the problem's
  place in the batch (increasing along a stream), step = 0, terminated = the solution ended with EOS, truncated = it
  hit the token limit. Extra: kl (sum over tokens of behaviour minus reference logprob: the estimate RLOO
  penalises), problem_id, answer (the exact known answer), prompt (the full text the policy saw), completion_ids.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.history import ColumnSpec, HistorySpec, HistoryWriter

SPEC = HistorySpec(state=ColumnSpec.text(), action=ColumnSpec.text(), logprob="per_token",
                   extra={"kl": "float32", "problem_id": "string", "answer": "string", "prompt": "string",
                          "completion_ids": "list<int32>"})


def chunk_task(chunk: int) -> str:
    """Task name of the unit that holds the training iterations of chunk ``chunk``."""
    return f"math-c{chunk:04d}"


class MathRolloutLog:
    """Collects the generation batches of the current chunk; :meth:`commit` writes them as one unit."""

    def __init__(self, writer: HistoryWriter, run: int, num_generations: int, eos_ids: set[int]) -> None:
        self.writer, self.run, self.G, self.eos_ids = writer, run, num_generations, eos_ids
        self.rows: dict[str, list[Any]] = self._empty()
        self.rows_logged = 0

    @staticmethod
    def _empty() -> dict[str, list[Any]]:
        return {k: [] for k in ("stream", "update", "episode", "state", "action", "reward", "terminated", "logprob",
                                "kl", "problem_id", "answer", "prompt", "completion_ids")}

    def add(self, update: int, batch: dict[str, Any]) -> None:
        """Buffer one generation batch (rows grouped ``num_generations`` by ``num_generations``, trl's order).

        ``batch``: prompts, completions, completion_ids, rewards, logprobs, kl, question, problem_id, answer."""
        n = len(batch["completions"])
        if n % self.G or any(len(batch[k]) != n for k in ("prompts", "completion_ids", "rewards", "logprobs", "kl",
                                                          "question", "problem_id", "answer")):
            raise RuntimeError(f"rollout batch columns disagree in length at update {update}")
        stream = np.arange(n) % self.G  # (n,) position in the group
        r = self.rows
        r["stream"] += stream.tolist()
        r["update"] += [update] * n
        r["episode"] += (update * (n // self.G) + np.arange(n) // self.G).tolist()  # resume-safe: from the update
        r["state"] += list(batch["question"])
        r["action"] += list(batch["completions"])
        r["reward"] += [float(x) for x in batch["rewards"]]
        r["terminated"] += [len(c) > 0 and int(c[-1]) in self.eos_ids for c in batch["completion_ids"]]
        r["logprob"] += [np.asarray(lp, np.float32) for lp in batch["logprobs"]]
        r["kl"] += [float(x) for x in batch["kl"]]
        r["problem_id"] += list(batch["problem_id"])
        r["answer"] += list(batch["answer"])
        r["prompt"] += list(batch["prompts"])
        r["completion_ids"] += [list(map(int, c)) for c in batch["completion_ids"]]

    @property
    def pending_rows(self) -> int:
        return len(self.rows["stream"])

    def columns(self) -> dict[str, Any]:
        """The buffered rows as one history column batch."""
        r = self.rows
        n = len(r["stream"])
        terminated = np.asarray(r["terminated"], bool)
        return {"stream": np.asarray(r["stream"], np.int32), "update": np.asarray(r["update"], np.int64),
                "episode": np.asarray(r["episode"], np.int32), "step": np.zeros(n, np.int32),
                "state": r["state"], "action": r["action"], "reward": np.asarray(r["reward"], np.float32),
                "terminated": terminated, "truncated": ~terminated, "logprob": r["logprob"],
                "kl": np.asarray(r["kl"], np.float32), "problem_id": r["problem_id"], "answer": r["answer"],
                "prompt": r["prompt"], "completion_ids": r["completion_ids"]}

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
        self.rows = self._empty()
        self.rows_logged += rows
        return rows
