"""The two formats of a learning history: RL format (arrays) and Language format (text).

The Language-format names load eagerly (task plugins register templates at import, and ``ad --help`` imports
every plugin); the RL-format ones, which read Parquet through pyarrow, load on first use.
"""
from ad.formats.language import (TEMPLATES, CompactTemplate, GridWordTemplate, RolloutTemplate, Template,
                                 VectorTemplate, WordTemplate, get_template, register_template, tokenize_segments)
from ad.registry import lazy_exports

_LAZY = {name: "ad.formats.rl" for name in ("RL_COLUMNS", "WindowSource", "build_window_source",
                                            "load_window_source", "reference_windows", "select_episodes")}

__all__ = ["TEMPLATES", "Template", "CompactTemplate", "GridWordTemplate", "RolloutTemplate", "VectorTemplate",
           "WordTemplate", "get_template", "register_template", "tokenize_segments", *_LAZY]
__getattr__ = lazy_exports(__name__, _LAZY)
