"""Every completion GRPO generates, buffered per chunk of training iterations and committed as one history unit.

One row = one completion = a one-step episode: state = prompt text, action = completion text, reward, per-token
behaviour logprob, update = training iteration, stream = position in its generation group, episode = the row's
index within its stream, terminated = ended with EOS, truncated = hit the token limit; extra columns advantage,
prompt_ids and completion_ids.
"""
from __future__ import annotations


import numpy as np

from ad.history import ColumnSpec, HistorySpec, HistoryWriter
from tasks.trl_runs.rollout_log import ChunkLog
from tasks.trl_runs.rollout_log import chunk_task as _chunk_task

SPEC = HistorySpec(state=ColumnSpec.text(), action=ColumnSpec.text(), logprob="per_token",
                   extra={"advantage": "float32", "prompt_ids": "list<int32>", "completion_ids": "list<int32>"})
#: Task names of the units: ``sentiment-c0000``, ``sentiment-c0001`` ...
PREFIX = "sentiment"


def chunk_task(chunk: int) -> str:
    """Task name of the unit that holds training iterations of chunk ``chunk``."""
    return _chunk_task(PREFIX, chunk)


class RolloutLog(ChunkLog):
    """Collects the generation batches of the current chunk; :meth:`commit` writes them as one unit."""

    def __init__(self, writer: HistoryWriter, run: int, num_generations: int) -> None:
        super().__init__(writer, run, PREFIX)
        self.G = num_generations
        self._episodes = np.zeros(num_generations, np.int64)  # next episode index of each stream

    def add(self, update: int, prompts: list[str], completions: list[str], rewards: list[float],
            prompt_ids: list[list[int]], completion_ids: list[list[int]], logprobs: list[np.ndarray],
            advantages: np.ndarray, terminated: np.ndarray) -> None:
        """Buffer one generation batch (n rows, grouped G by G as trl orders them)."""
        n = len(completions)
        if not (len(prompts) == len(rewards) == len(prompt_ids) == len(completion_ids) == len(logprobs)
                == len(advantages) == n):
            raise RuntimeError(f"rollout batch columns disagree in length at update {update}")
        stream = np.arange(n) % self.G  # (n,) position in the generation group
        episode = self._episodes[stream] + np.arange(n) // self.G
        self._episodes += n // self.G
        done = np.asarray(terminated, bool)
        self.append({"stream": stream.astype(np.int32), "update": np.full(n, update, np.int64),
                     "episode": episode.astype(np.int32), "step": np.zeros(n, np.int32),
                     "state": list(prompts), "action": list(completions),
                     "reward": np.asarray(rewards, np.float32), "terminated": done, "truncated": ~done,
                     "logprob": [np.asarray(lp, np.float32) for lp in logprobs],
                     "advantage": np.asarray(advantages, np.float32),
                     "prompt_ids": [list(map(int, ids)) for ids in prompt_ids],
                     "completion_ids": [list(map(int, ids)) for ids in completion_ids]})
