"""RL-format windows against a slow reference, episode selection, and the DataLoader path."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ad.data import RLDataModule, RLTrajectoryDataset
from ad.errors import UserError
from ad.formats.rl import build_window_source, select_episodes
from benchmarks.helpers.references import reference_windows
from ad.history import HistoryReader, Stream


def _stream(sid: int, n: int, rng, episode_length: int = 4) -> Stream:
    t = np.arange(n)
    return Stream("task", 0, sid, {"episode": (t // episode_length).astype(np.int32),
                                   "step": (t % episode_length).astype(np.int32),
                                   "state": rng.integers(0, 9, n), "action": rng.integers(0, 5, n),
                                   "reward": rng.random(n).astype(np.float32),
                                   "logprob": -rng.random(n).astype(np.float32),
                                   "terminated": np.zeros(n, bool), "truncated": t % episode_length == 3})


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=5), window=st.integers(1, 12),
       stride=st.integers(1, 5), seed=st.integers(0, 1000))
def test_windows_match_reference(lengths, window, stride, seed):
    rng = np.random.default_rng(seed)
    streams = [_stream(i, n, rng) for i, n in enumerate(lengths)]
    if max(lengths) < window:
        with pytest.raises(UserError, match="longer than every stream"):
            build_window_source(streams, window, stride)
        return
    source = build_window_source(streams, window, stride)
    expected = reference_windows(streams, window, stride)
    assert len(source) == len(expected)
    batch = source.gather(np.arange(len(source)))
    for i, ref in enumerate(expected):
        for key, values in ref.items():
            np.testing.assert_allclose(batch[key][i], values)
    assert batch["mask"].all()
    # the window at each kept stream's first row, in stream order
    kept = [s for s in streams if len(s.columns["episode"]) >= window]
    assert len(source.history_starts) == len(kept) == len(source.streams)
    for first, stream in zip(source.history_starts, kept):
        assert source.stream_of_start[first] == source.streams.index((stream.task, stream.run, stream.stream))
        np.testing.assert_array_equal(batch["states"][first], stream.columns["state"][:window])


def test_history_start_share_draws_that_share_of_first_windows():
    rng = np.random.default_rng(0)
    streams = [_stream(i, n, rng) for i, n in enumerate([40, 0, 25, 60])]
    ds = RLTrajectoryDataset(build_window_source(streams, 8))
    firsts = set(ds.source.history_starts.tolist())
    alike = len(firsts) / len(ds)  # every window alike: 3 of 103
    for share in (0.0, 0.3, 1.0):
        loader = ds.loader(batch_size=100, num_samples=20_000, seed=1, history_start_share=share)
        assert next(iter(loader))["states"].shape == (100, 8)
        indices = np.fromiter(iter(loader.sampler), dtype=np.int64)  # the windows the loader draws
        got = np.isin(indices, list(firsts)).mean()
        expected = share + (1 - share) * alike
        assert abs(got - expected) < 0.015, (share, got, expected)
        # each first window alike within the share
        if share == 1.0:
            counts = np.bincount(indices, minlength=len(ds))[sorted(firsts)]
            assert counts.min() > 0.9 * counts.mean()


def test_windows_cross_episode_boundaries():
    streams = [_stream(0, 20, np.random.default_rng(0), episode_length=4)]
    batch = build_window_source(streams, 10).gather([0])
    assert list(batch["timesteps"][0]) == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]


def test_subsample_and_expert_selection():
    cols = _stream(0, 40, np.random.default_rng(0)).columns  # 10 episodes of 4
    every3 = select_episodes(cols, every=3)
    assert sorted(set(every3["episode"].tolist())) == [0, 3, 6, 9]
    expert = select_episodes(cols, last_fraction=0.2)
    assert sorted(set(expert["episode"].tolist())) == [8, 9]
    # a last fraction shorter than a window: as many last episodes as fill one (whole episodes), at most all
    assert sorted(set(select_episodes(cols, last_fraction=0.2, min_rows=8)["episode"].tolist())) == [8, 9]
    assert sorted(set(select_episodes(cols, last_fraction=0.2, min_rows=9)["episode"].tolist())) == [7, 8, 9]
    assert len(select_episodes(cols, last_fraction=0.2, min_rows=100)["episode"]) == 40
    source = build_window_source([_stream(0, 40, np.random.default_rng(0))], 12, last_fraction=0.1)
    assert len(source) == 1 and len(source.columns["states"]) == 12  # 10% = 1 episode of 4: three kept


def test_dataset_dataloader_batches(synthetic_dataset):
    ds = RLTrajectoryDataset(synthetic_dataset, window=50, stride=10)
    batch = next(iter(ds.loader(batch_size=8, num_samples=16)))
    assert batch["states"].shape == (8, 50) and str(batch["states"].dtype) == "torch.int64"
    assert batch["rewards"].dtype.is_floating_point and batch["mask"].all()
    single = ds[3]
    assert single["actions"].shape == (50,)


def test_datamodule_splits_by_task(synthetic_dataset):
    dm = RLDataModule(synthetic_dataset, window=40, batch_size=4, steps_per_epoch=2)
    dm.setup()
    reader = HistoryReader(synthetic_dataset)
    assert set(dm.train_tasks) | set(dm.heldout_tasks) == set(reader.tasks())
    assert not set(dm.train_tasks) & set(dm.heldout_tasks)
    assert dm.heldout_tasks == reader.metadata["split"]["heldout"]
    assert {s[0] for s in dm.train_set.source.streams} == set(dm.train_tasks)
    assert len(list(dm.train_dataloader())) == 2
    assert next(iter(dm.val_dataloader()))["states"].shape == (4, 40)


def test_window_longer_than_every_stream_is_a_clear_error(synthetic_dataset):
    with pytest.raises(UserError, match="longer than every stream"):
        RLTrajectoryDataset(synthetic_dataset, window=10_000)
