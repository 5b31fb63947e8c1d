"""The two formats of a learning history: RL format (arrays) and Language format (text).

Every name loads on first use: the Language-format ones from :mod:`ad.formats.language` (task plugins register
their templates through them), the RL-format ones, which read Parquet through pyarrow, from :mod:`ad.formats.rl`.
"""
from ad.registry import lazy_exports

_LAZY = {**{name: "ad.formats.language" for name in ("TEMPLATES", "Template", "CompactTemplate", "GridWordTemplate",
                                                    "RolloutTemplate", "VectorTemplate", "WordTemplate",
                                                    "get_template", "register_template", "tokenize_segments")},
         **{name: "ad.formats.rl" for name in ("RL_COLUMNS", "WindowSource", "build_window_source",
                                               "load_window_source", "select_episodes")}}

__all__ = list(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
