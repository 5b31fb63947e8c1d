"""Load an `ad train lm` run folder as an in-context policy (registered for ``ad eval``)."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from ad.errors import UserError
from ad.registry import register_policy_loader
from models import saved_model_dir

MODEL_TYPE = "ad-lm"
#: folder of a model trained from scratch inside model/ (all weights; LoRA runs have adapter/ instead)
WEIGHTS_DIR = "weights"


def model_dir(path: Any) -> Path | None:
    """The saved-model folder inside an ``ad train lm`` run folder (or the folder itself)."""
    return saved_model_dir(path, "lm.json", MODEL_TYPE)


def detect(path: Any) -> bool:
    return model_dir(path) is not None


def load_model(path: Any) -> tuple[Any, Any, dict[str, Any]]:
    """(model with the adapters merged in, tokenizer, lm.json) of a run folder."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ad.lm.pretrained import ensure_pad_token, load_base

    folder = model_dir(path)
    info = json.loads((folder / "lm.json").read_text())
    if (folder / WEIGHTS_DIR).is_dir():  # trained from scratch: the whole model
        model = AutoModelForCausalLM.from_pretrained(folder / WEIGHTS_DIR, local_files_only=True)
    else:
        base, _ = load_base(info["base_model"], info.get("dtype", "float32"))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")  # peft calls a deprecated API
            model = PeftModel.from_pretrained(base, folder / "adapter").merge_and_unload()  # acting: no LoRA overhead
    return model.eval(), ensure_pad_token(AutoTokenizer.from_pretrained(folder / "tokenizer")), info


def load(path: Any, greedy: bool = False, seed: int = 0, threads: int | None = None,
         temperature: float = 1.0, sampling: str = "step", action_order: Any = None) -> Any:
    """An :class:`~models.lm.policy.LMPolicy` (``num_states`` / ``num_actions`` attributes for checks); a model
    trained on open-text actions acts by free generation instead (``GeneratePolicy``; unparsable output raises).
    Its actions are drawn afresh at every step: ``sampling="episode"`` is refused (``action_order`` unused)."""
    import torch

    from ad.progress.hf import library_bars_off_in_logs
    from models.lm.policy import GeneratePolicy, LMPolicy

    if sampling != "step":
        raise UserError(f"{path} is a language model, which draws every action afresh (--sampling step); "
                        f"--sampling {sampling} is for the RL-format models")
    if threads:
        torch.set_num_threads(threads)
    library_bars_off_in_logs()
    model, tokenizer, info = load_model(path)
    window = {"greedy": greedy, "generator": torch.Generator().manual_seed(seed), "context": info["context"],
              "max_tokens": info["max_tokens"], "temperature": temperature}
    if info["actions"] is None:
        policy = GeneratePolicy(model, tokenizer, info["template"], None, on_invalid="error", **window)
    else:
        policy = LMPolicy(model, tokenizer, info["template"], info["actions"], **window)
    policy.num_states = info.get("num_states")
    return policy


register_policy_loader("lm", detect, load)
