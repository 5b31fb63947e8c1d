"""An interrupted generation in a test: the second unit's commit raises KeyboardInterrupt, as Ctrl-C there would."""
from __future__ import annotations

from typing import Any, Callable

import pytest


def interrupt_at_second_commit(monkeypatch: Any, run: Callable[[], Any]) -> None:
    """Call ``run`` with every :class:`ad.record.HistoryRecorder` commit after the first interrupted; expects the
    interrupt to reach the caller, and restores the recorder afterwards."""
    from ad.record import HistoryRecorder

    calls = {"n": 0}
    close = HistoryRecorder.close

    def failing_close(self: Any, info: Any = None) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return close(self, info)

    monkeypatch.setattr(HistoryRecorder, "close", failing_close)
    with pytest.raises(KeyboardInterrupt):
        run()
    monkeypatch.undo()


def assert_same_histories(want: Any, got: Any, columns: tuple[str, ...] = ("action", "update", "episode", "state"),
                          streams: int | None = None) -> None:
    """Every task of reader ``want`` has the same streams in reader ``got`` (``streams`` of them, when given), equal
    in ``columns`` (floats to rounding)."""
    import numpy as np

    assert sorted(u["task"] for u in got.units()) == sorted(u["task"] for u in want.units())
    for task in want.metadata["tasks"]:
        a = [s.columns for s in want.streams(tasks=[task])]
        b = [s.columns for s in got.streams(tasks=[task])]
        assert len(a) == len(b) and (streams is None or len(a) == streams)
        for x, y in zip(a, b):
            for name in columns:
                np.testing.assert_allclose(x[name], y[name])
