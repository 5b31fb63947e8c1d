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
