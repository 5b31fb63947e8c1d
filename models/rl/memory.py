"""Rough training memory of the AD transformer, so that absurd sizes are refused before anything is allocated."""
from __future__ import annotations

from typing import Any

#: Bytes per trained parameter: float32 weights, gradient and AdamW's two moments.
BYTES_PER_PARAMETER = 16


def parameter_count(config: Any) -> int:
    """Parameters of the blocks (attention, feed-forward, norms) and of the embeddings and heads the options fix
    (the dataset's state / action tables are left out: they are small next to absurd sizes)."""
    d, ff = config.n_embd, config.n_ff
    block = 4 * d * d + 2 * d * ff + 8 * d + ff
    tokens = config.context * (1 if config.layout == "transition" else 3)
    return config.n_layer * block + (tokens + config.num_states + config.num_actions + config.episode_length + 16) * d


def training_memory_bytes(config: Any) -> int:
    """Peak memory of one optimiser step: parameters, gradients and Adam moments, plus the activations the
    backward pass keeps (per layer and token: the residual stream, queries / keys / values and the feed-forward
    hidden layer), in float32, twice over for the gradients of the activations. Attention weights are left out:
    torch's fused attention keeps them linear in the context, so this is a lower bound that only refuses sizes
    no run could take."""
    tokens = config.context * (1 if config.layout == "transition" else 3)
    per_layer = tokens * (8 * config.n_embd + 2 * config.n_ff)
    activations = 2 * 4 * config.batch_size * config.n_layer * per_layer
    return BYTES_PER_PARAMETER * parameter_count(config) + activations
