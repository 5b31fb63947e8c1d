"""History I/O: ours (Parquet store) vs naive baselines (JSON lines per transition; pandas to_parquet
per episode) on a synthetic DarkRoom-like history (int state 0..80, 5 actions, 0/1 reward, float logprob).

Figures: bytes per transition on disk, write and read-into-contiguous-arrays throughput, and
RL-format windows of 80 transitions per second through a DataLoader.

    python benchmarks/history_io.py            # 10M transitions (baselines on a 1M / 200k slice)
    python benchmarks/history_io.py --quick    # 1M transitions, under a minute
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report, timed  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M transitions instead of 10M")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
import torch  # noqa: E402
from ad.data import RLTrajectoryDataset  # noqa: E402
from ad.history import ColumnSpec, HistoryReader, HistorySpec, HistoryWriter  # noqa: E402
from benchmarks.helpers.synthetic import synthetic_columns  # noqa: E402


SPEC = HistorySpec(ColumnSpec.discrete(81), ColumnSpec.discrete(5))
#: The opt-in lossy logprob precision measured beside the exact default
#: (7 mantissa bits = bfloat16 precision: relative error <= 2^-8).
ROUNDED_BITS = 7
STREAMS, WINDOW, BATCH = 10, 80, 256


def make_units(total: int, per_task: int, seed: int = 0) -> list[tuple[str, dict[str, np.ndarray]]]:
    rng = np.random.default_rng(seed)
    units = []
    for i in range(max(1, total // per_task)):
        goal = (i % 9, (i * 4) % 9)
        units.append((f"bench9-g{i}", synthetic_columns(rng, STREAMS, per_task // STREAMS, goal, with_value=False)))
    return units


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# ---------------------------------------------------------------------------- ours
def ours_write(units, out: Path, spec: HistorySpec = SPEC) -> None:
    writer = HistoryWriter(out, spec, family="bench")
    for task, cols in units:
        with writer.unit(task, 0) as unit:
            chunk = 250_000  # as a generator would hand batches over
            for start in range(0, len(cols["stream"]), chunk):
                unit.append({k: v[start:start + chunk] for k, v in cols.items()})
    writer.close()


def ours_read(out: Path) -> int:
    streams = HistoryReader(out).streams()
    return sum(len(s) for s in streams)


def ours_windows(out: Path, batches: int) -> int:
    ds = RLTrajectoryDataset(out, window=WINDOW)
    loader = ds.loader(BATCH, num_samples=batches * BATCH, seed=0)
    count = 0
    for batch in loader:
        count += batch["states"].shape[0]
    return count


# ---------------------------------------------------------------------------- baselines
def rows_of(cols: dict[str, np.ndarray]) -> list[dict]:
    keys = list(cols)
    lists = [cols[k].tolist() for k in keys]
    return [dict(zip(keys, values)) for values in zip(*lists)]


def jsonl_write(units, out: Path) -> None:
    out.mkdir(parents=True)
    for task, cols in units:
        with open(out / f"{task}.jsonl", "w") as fh:
            for row in rows_of(cols):
                row["task"] = task
                fh.write(json.dumps(row) + "\n")


def jsonl_read(out: Path) -> int:
    n = 0
    for file in sorted(out.glob("*.jsonl")):
        rows = [json.loads(line) for line in open(file)]
        by_stream: dict[int, list[dict]] = {}
        for row in rows:
            by_stream.setdefault(row["stream"], []).append(row)
        for stream_rows in by_stream.values():
            arrays = {k: np.array([r[k] for r in stream_rows]) for k in ("state", "action", "reward", "logprob",
                                                                         "step", "episode")}
            n += len(arrays["state"])
    return n


def pandas_write(units, out: Path) -> None:
    import pandas as pd

    out.mkdir(parents=True)
    for task, cols in units:
        frame = pd.DataFrame(cols)
        for (stream, episode), part in frame.groupby(["stream", "episode"], sort=False):
            part.to_parquet(out / f"{task}-s{stream}-e{episode}.parquet", index=False)


def pandas_read(out: Path) -> int:
    import pandas as pd

    files = sorted(out.glob("*.parquet"))
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    n = 0
    for _, part in frame.groupby("stream", sort=True):
        n += len(np.ascontiguousarray(part["state"].to_numpy()))
    return n


class NaiveWindows(torch.utils.data.Dataset):
    """What public AD code typically does: one window per __getitem__, default collate."""

    def __init__(self, cols: dict[str, np.ndarray], window: int) -> None:
        self.cols = {k: cols[k] for k in ("state", "action", "reward", "logprob", "step")}
        self.window = window
        self.n = len(cols["state"]) - window

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        sl = slice(i, i + self.window)
        return {"states": torch.as_tensor(self.cols["state"][sl]), "actions": torch.as_tensor(self.cols["action"][sl]),
                "rewards": torch.as_tensor(self.cols["reward"][sl]),
                "logprobs": torch.as_tensor(self.cols["logprob"][sl]),
                "timesteps": torch.as_tensor(self.cols["step"][sl]), "mask": torch.ones(self.window, dtype=torch.bool)}


def naive_windows(cols, batches: int) -> int:
    loader = torch.utils.data.DataLoader(NaiveWindows(cols, WINDOW), batch_size=BATCH, shuffle=True)
    count = 0
    for i, batch in enumerate(loader):
        count += batch["states"].shape[0]
        if i + 1 >= batches:
            break
    return count


def main(args: argparse.Namespace) -> None:
    total = 1_000_000 if args.quick else 10_000_000
    per_task = 250_000
    baseline_jsonl = 100_000 if args.quick else 1_000_000
    baseline_pandas = 20_000 if args.quick else 200_000
    torch.set_num_threads(1)

    units = make_units(total, per_task)
    total = sum(len(c["stream"]) for _, c in units)
    tmp = Path(tempfile.mkdtemp(prefix="history_io_"))
    try:
        print(f"ours: {total:,} transitions in {len(units)} units")
        rounded_spec = HistorySpec(SPEC.state, SPEC.action, logprob_bits=ROUNDED_BITS)
        t_write = t_write_rounded = float("inf")
        for attempt in range(2):  # exact and rounded alternate; the faster of two writes each (the first allocates)
            shutil.rmtree(tmp / "ours", ignore_errors=True)
            t_write = min(t_write, timed(lambda: ours_write(units, tmp / "ours"))[0])
            shutil.rmtree(tmp / "rounded", ignore_errors=True)
            t_write_rounded = min(t_write_rounded, timed(lambda: ours_write(units, tmp / "rounded", rounded_spec))[0])
        ours_bytes = dir_bytes(tmp / "ours") / total
        rounded_bytes = dir_bytes(tmp / "rounded") / total
        shutil.rmtree(tmp / "rounded")
        reads = [timed(lambda: ours_read(tmp / "ours")) for _ in range(3)]  # median of 3 (first is allocation-bound)
        t_read, n_read = sorted(reads)[1]
        assert n_read == total
        win_batches = 400 if args.quick else 2000
        t_win, n_win = timed(lambda: ours_windows(tmp / "ours", win_batches))

        def slice_units(limit: int):
            out, left = [], limit
            for task, cols in units:
                take = min(left, len(cols["stream"]))
                # whole streams only: keep the first `take` rows of a stream-major unit
                out.append((task, {k: v[:take] for k, v in cols.items()}))
                left -= take
                if left <= 0:
                    break
            return out

        jsonl_units = slice_units(baseline_jsonl)
        print(f"baseline JSONL: {baseline_jsonl:,} transitions; pandas per-episode: {baseline_pandas:,}")
        t_jw, _ = timed(lambda: jsonl_write(jsonl_units, tmp / "jsonl"))
        jsonl_bytes = dir_bytes(tmp / "jsonl") / baseline_jsonl
        t_jr, n_jr = timed(lambda: jsonl_read(tmp / "jsonl"))
        pandas_units = slice_units(baseline_pandas)
        t_pw, _ = timed(lambda: pandas_write(pandas_units, tmp / "pandas"))
        pandas_bytes = dir_bytes(tmp / "pandas") / baseline_pandas
        t_pr, n_pr = timed(lambda: pandas_read(tmp / "pandas"))
        t_nw, n_nw = timed(lambda: naive_windows(units[0][1], max(20, win_batches // 20)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    figures = [
        figure("bytes per transition on disk (vs JSONL)", "bytes", ours_bytes, jsonl_bytes, "ours <= 2",
               higher_is_better=False),
        figure("bytes per transition on disk (vs pandas per-episode Parquet)", "bytes", ours_bytes, pandas_bytes,
               "ours <= 2", higher_is_better=False),
        figure(f"bytes per transition, opt-in logprob_bits={ROUNDED_BITS} (lossy: logprob relative error <= "
               f"2^-{ROUNDED_BITS + 1}) vs exact float32 logprob", "bytes", rounded_bytes, ours_bytes, "ours <= 2",
               higher_is_better=False),
        figure(f"write throughput, logprob_bits={ROUNDED_BITS} vs exact", "transitions/s", total / t_write_rounded,
               total / t_write, "-"),
        figure("write throughput (vs JSONL)", "transitions/s", total / t_write, baseline_jsonl / t_jw, "higher"),
        figure("write throughput (vs pandas per episode)", "transitions/s", total / t_write,
               baseline_pandas / t_pw, "higher"),
        figure("read into contiguous per-stream arrays (vs JSONL)", "transitions/s", n_read / t_read,
               n_jr / t_jr, ">= 10M/s"),
        figure("read into contiguous per-stream arrays (vs pandas)", "transitions/s", n_read / t_read,
               n_pr / t_pr, ">= 10M/s"),
        figure(f"RL windows of {WINDOW} through a DataLoader (batch {BATCH})", "windows/s", n_win / t_win,
               n_nw / t_nw, ">= 100k/s"),
    ]
    report("history_io", figures, args.quick, page="history-store")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(ARGS)
