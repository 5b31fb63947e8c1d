"""A Llama-style causal LM built from a ``transformers`` config, trained from scratch on a word tokenizer: the
Language-format counterpart of the RL-format AD transformer, a vocabulary of the template's own words, and nothing
else than a standard ``LlamaForCausalLM`` (``save_pretrained`` / ``from_pretrained``).
"""
from __future__ import annotations

from typing import Any


def build_scratch(tokenizer: Any, n_layer: int = 2, n_embd: int = 64, n_head: int = 4, n_ff: int = 256,
                  max_positions: int = 1024, seed: int = 0) -> Any:
    """A randomly initialised ``LlamaForCausalLM`` sized for ``tokenizer``'s vocabulary (weights seeded)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=n_embd, intermediate_size=n_ff,
                         num_hidden_layers=n_layer, num_attention_heads=n_head, num_key_value_heads=n_head,
                         max_position_embeddings=max_positions, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None, tie_word_embeddings=True,
                         attn_implementation="sdpa")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)


def scratch_tokenizer(reader: Any, template: Any) -> Any:
    """The word tokenizer of ``template`` for a dataset: discrete states, actions and reward values (``words``,
    ``grid<N>``), or Box states and discrete actions (``bins<L>``, ``pairs<L>``, ``vector``)."""
    from ad.errors import UserError
    from models.lm.vocab import box_tokenizer, dataset_rewards, template_tokenizer

    spec = reader.spec
    if spec.action.kind != "discrete" or spec.state.kind not in ("discrete", "vector"):
        raise UserError(f"--model scratch needs discrete actions and discrete or Box states; dataset "
                        f"{reader.location.base} has {spec.state.kind} states and {spec.action.kind} actions: use a "
                        "pretrained --model")
    if spec.state.kind == "vector":
        return box_tokenizer(template, int(spec.state.dim), int(spec.action.n))
    rewards = dataset_rewards([s.columns["reward"] for s in reader.streams(columns=["reward"])])
    return template_tokenizer(template, int(spec.state.n), int(spec.action.n), rewards)
