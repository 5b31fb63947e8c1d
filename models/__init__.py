"""Models trained on learning histories: `models.rl` (RL format) and `models.lm` (Language format)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def saved_model_dir(path: Any, file: str, model_type: str) -> Path | None:
    """The saved-model folder of a run folder (``<path>/model``, or ``path`` itself) whose ``file`` names
    ``model_type``; None where neither does, a UserError where ``file`` is corrupt."""
    for candidate in (Path(path) / "model", Path(path)):
        info = candidate / file
        if info.is_file():
            try:
                if json.loads(info.read_text()).get("model_type") == model_type:
                    return candidate
            except ValueError as err:
                from models.trainer import corrupt_model_file

                raise corrupt_model_file(info, err) from None
    return None
