"""The source's learning speed read from its histories, and the subsampling rate `ad demo --subsample 0` derives."""
from __future__ import annotations

import numpy as np
import pytest

from ad.data.learning_speed import episodes_to_learn, subsample_for
from ad.errors import UserError
from ad.history import ColumnSpec, HistoryReader, HistorySpec, HistoryWriter


def _dataset(path, first_good: dict[str, list[int]], episodes: int = 60, optimum: float = 4.0):
    """Streams whose episode return is 0 before episode ``first_good[task][stream]`` and ``optimum`` from it on
    (2-step episodes, reward on the last step)."""
    spec = HistorySpec(state=ColumnSpec.discrete(4), action=ColumnSpec.discrete(2))
    tasks = {t: {"optimal_return": optimum} for t in first_good}
    writer = HistoryWriter(path, spec, family="toy", metadata={"tasks": tasks, "split": {"train": list(first_good),
                                                                                          "heldout": []}})
    for task, starts in first_good.items():
        with writer.unit(task=task, run=0) as unit:
            for stream, start in enumerate(starts):
                ep = np.repeat(np.arange(episodes), 2)
                step = np.tile([0, 1], episodes)
                reward = np.where((step == 1) & (ep >= start), optimum, 0.0).astype(np.float32)
                n = len(ep)
                unit.append({"stream": np.full(n, stream), "update": ep, "episode": ep, "step": step,
                             "state": np.zeros(n, np.int64), "action": np.zeros(n, np.int64), "reward": reward,
                             "terminated": np.zeros(n, bool), "truncated": step == 1,
                             "logprob": np.zeros(n, np.float32)})
    writer.close()
    return HistoryReader(path)


def test_episodes_to_learn_is_the_median_first_episode_of_the_smoothed_curve(tmp_path):
    reader = _dataset(tmp_path / "d", {"a": [10, 20], "b": [30]})
    # a 10-episode mean reaches 90% once 9 of its 10 episodes are good: start + 9 episodes in all
    assert episodes_to_learn(reader, ["a", "b"]) == pytest.approx(20 + 9)
    assert subsample_for(reader, ["a", "b"], learning_episodes=10) == (3, 29.0)
    assert subsample_for(reader, ["a"], learning_episodes=100)[0] == 1  # never below 1


def test_a_stream_that_never_learns_counts_its_length(tmp_path):
    reader = _dataset(tmp_path / "d", {"a": [100]}, episodes=60)
    assert episodes_to_learn(reader, ["a"]) == 60


def test_tasks_without_an_optimal_return_are_refused(tmp_path):
    reader = _dataset(tmp_path / "d", {"a": [5]})
    reader.metadata["tasks"] = {}
    with pytest.raises(UserError, match="no optimal return for task a; pass the subsampling rate"):
        episodes_to_learn(reader, ["a"])
