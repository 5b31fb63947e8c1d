"""A tiny randomly initialised Llama with a character-level tokenizer, saved as a local model folder.

For tests and smoke runs: offline, seconds to train, and ``--model <folder>`` loads it like any other model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

#: Every character the built-in templates write (compact and rollout), plus letters for free text.
CHARACTERS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ |\n.:-#,_'\"!?()[]{}=+*/<>"


def char_tokenizer(pad: bool = True) -> Any:
    """A ``PreTrainedTokenizerFast`` with one token per character (``<unk>``, ``<eos>``, optional ``<pad>``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<eos>"] + (["<pad>"] if pad else [])
    vocab = {tok: i for i, tok in enumerate(specials + list(CHARACTERS))}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    extra = {"pad_token": "<pad>"} if pad else {}
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", eos_token="<eos>", **extra)


def build_tiny(out: Any, n_layer: int = 2, width: int = 32, heads: int = 2, pad: bool = True,
               max_positions: int = 512, seed: int = 0, kv_heads: int | None = None) -> Path:
    """Save a tiny random ``LlamaForCausalLM`` + char tokenizer to ``out``; returns the folder. ``kv_heads``: key /
    value heads (grouped-query attention when fewer than ``heads``; default ``heads``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = char_tokenizer(pad)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=width, intermediate_size=2 * width,
                         num_hidden_layers=n_layer, num_attention_heads=heads, num_key_value_heads=kv_heads or heads,
                         max_position_embeddings=max_positions, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    out = Path(out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
