"""Load a trained AD transformer folder as an in-context policy (registered for ``ad eval``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ad.errors import UserError
from ad.registry import register_policy_loader
from models import saved_model_dir

#: In a saved model's folder: the task family and task spec of the dataset it was trained on (``ad train rl``).
TRAINING_DATA_FILE = "training_data.json"


def model_dir(path: Any) -> Path | None:
    """The saved-model folder inside an ``ad train rl`` run folder (or the folder itself)."""
    return saved_model_dir(path, "config.json", "ad-rl")


def detect(path: Any) -> bool:
    return model_dir(path) is not None


def load(path: Any, greedy: bool = False, seed: int = 0, threads: int | None = None,
         temperature: float = 1.0, sampling: str = "step", action_order: Any = None) -> Any:
    """An :class:`~models.rl.policy.ADPolicy` with ``num_states`` / ``num_actions`` attributes for checks
    (``sampling`` and ``action_order``: how it draws its actions, see the policy)."""
    import torch

    from models.rl.model import ADTransformer
    from models.rl.policy import ADPolicy

    if threads:
        torch.set_num_threads(threads)
    model = ADTransformer.from_pretrained(model_dir(path))
    policy = ADPolicy(model, greedy=greedy, generator=torch.Generator().manual_seed(seed), temperature=temperature,
                      sampling=sampling, action_order=None if model.config.action_dim else action_order)
    policy.num_states = model.config.num_states
    policy.num_actions = model.config.num_actions
    policy.action_dim = model.config.action_dim
    # the longest episode it can act in (None: any, a model that does not embed time steps)
    policy.episode_length = model.config.episode_length if model.config.time_embedding else None
    policy.family, policy.task_spec = training_data(model_dir(path))
    return policy


def training_data(directory: Path) -> tuple[str | None, dict]:
    """(task family, task spec) of a model's training dataset; (None, {}) for a model saved before they were kept."""
    file = directory / TRAINING_DATA_FILE
    if not file.is_file():
        return None, {}
    try:
        record = json.loads(file.read_text())
        return record.get("family"), dict(record.get("task_spec") or {})
    except (ValueError, AttributeError, TypeError):
        raise UserError(f"{file} is corrupt (not the JSON object `ad train rl` writes); retrain the model or delete "
                        "the file to skip the family check") from None


register_policy_loader("rl", detect, load)
