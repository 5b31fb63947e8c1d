"""The two formats of a learning history: RL format (arrays) and Language format (text)."""
from ad.formats.language import (TEMPLATES, CompactTemplate, GridWordTemplate, RolloutTemplate, Template,
                                 WordTemplate, get_template, register_template, tokenize_segments)
from ad.formats.rl import (RL_COLUMNS, WindowSource, build_window_source, load_window_source,
                           reference_windows, select_episodes)

__all__ = ["TEMPLATES", "Template", "CompactTemplate", "GridWordTemplate", "RolloutTemplate", "WordTemplate",
           "get_template", "register_template", "tokenize_segments", "RL_COLUMNS", "WindowSource",
           "build_window_source", "load_window_source", "reference_windows", "select_episodes"]
