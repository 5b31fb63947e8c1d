"""The learning-history store (the design page, docs/design.md: "The learning-history store").

Write with :class:`HistoryWriter`, read with :class:`HistoryReader`; the column
layout is a :class:`HistorySpec`.
"""
from ad.history.reader import HistoryReader, Stream, column_to_numpy
from ad.history.spec import SCHEMA_VERSION, ColumnSpec, HistorySpec
from ad.history.storage import Location
from ad.history.summary import episode_returns, summarize
from ad.history.unit import UnitWriter
from ad.history.writer import HistoryWriter
from ad.registry import lazy_exports

__all__ = ["HistoryWriter", "UnitWriter", "HistoryReader", "Stream", "HistorySpec", "ColumnSpec", "Location",
           "SCHEMA_VERSION", "column_to_numpy", "episode_returns", "summarize", "content_hash"]
__getattr__ = lazy_exports(__name__, {"content_hash": "ad.history.hashing"})  # read only by checks and tests
