"""Every solution RLOO samples, buffered per chunk of training iterations and committed as one history unit.

One row = one sampled solution = a one-step episode: state = the problem text, action = the solution, reward
(correctness plus the format reward), logprob = its per-token behaviour log-probabilities, update = the training
iteration, stream = position in its group of ``num_generations``, episode = update x problems per iteration + the
problem's place in the batch, terminated = ended with EOS, truncated = hit the token limit. Extra: kl (summed
behaviour minus reference logprob), problem_id, answer, prompt (the full text the policy saw), completion_ids.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ad.history import ColumnSpec, HistorySpec, HistoryWriter
from tasks.trl_runs.rollout_log import ChunkLog
from tasks.trl_runs.rollout_log import chunk_task as _chunk_task

SPEC = HistorySpec(state=ColumnSpec.text(), action=ColumnSpec.text(), logprob="per_token",
                   extra={"kl": "float32", "problem_id": "string", "answer": "string", "prompt": "string",
                          "completion_ids": "list<int32>"})
#: Task names of the units: ``math-c0000``, ``math-c0001`` ...
PREFIX = "math"


def chunk_task(chunk: int) -> str:
    """Task name of the unit that holds the training iterations of chunk ``chunk``."""
    return _chunk_task(PREFIX, chunk)


class MathRolloutLog(ChunkLog):
    """Collects the generation batches of the current chunk; :meth:`commit` writes them as one unit."""

    def __init__(self, writer: HistoryWriter, run: int, num_generations: int, eos_ids: set[int]) -> None:
        super().__init__(writer, run, PREFIX)
        self.G, self.eos_ids = num_generations, eos_ids

    def add(self, update: int, batch: dict[str, Any]) -> None:
        """Buffer one generation batch (rows grouped ``num_generations`` by ``num_generations``, trl's order): prompts,
        completions, completion_ids, rewards, logprobs, kl, question, problem_id, answer."""
        n = len(batch["completions"])
        if n % self.G or any(len(batch[k]) != n for k in ("prompts", "completion_ids", "rewards", "logprobs", "kl",
                                                          "question", "problem_id", "answer")):
            raise RuntimeError(f"rollout batch columns disagree in length at update {update}")
        terminated = np.array([len(c) > 0 and int(c[-1]) in self.eos_ids for c in batch["completion_ids"]], bool)
        self.append({"stream": (np.arange(n) % self.G).astype(np.int32),  # (n,) position in the group
                     "update": np.full(n, update, np.int64),
                     "episode": (update * (n // self.G) + np.arange(n) // self.G).astype(np.int32),  # resume-safe
                     "step": np.zeros(n, np.int32), "state": list(batch["question"]),
                     "action": list(batch["completions"]),
                     "reward": np.asarray([float(x) for x in batch["rewards"]], np.float32),
                     "terminated": terminated, "truncated": ~terminated,
                     "logprob": [np.asarray(lp, np.float32) for lp in batch["logprobs"]],
                     "kl": np.asarray([float(x) for x in batch["kl"]], np.float32),
                     "problem_id": list(batch["problem_id"]), "answer": list(batch["answer"]),
                     "prompt": list(batch["prompts"]),
                     "completion_ids": [list(map(int, c)) for c in batch["completion_ids"]]})
