"""A transformers KV cache that grows in place: what :class:`models.lm.policy.LMPolicy` acts with and the group
sampler (:mod:`tasks.lm_sampling`) samples with.

``DynamicCache`` copies the whole cache every step (``torch.cat``), and ``StaticCache`` attends over its whole
preallocated length; this layer keeps keys and values in a buffer with spare room (doubled when full) and hands
attention a view of the filled part. It is a ``DynamicLayer`` in every other respect (crop, batch repeat /
select), plugged in through the public ``Cache(layer_class_to_replicate=...)``.
"""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` / ``values`` (B, H, L, D) are views of a buffer (B, H, capacity, D)."""

    _key_buffer: torch.Tensor | None = None
    _value_buffer: torch.Tensor | None = None

    def _backed(self) -> bool:
        """Whether keys / values are still the leading part of the buffers (crop keeps that; batch ops do not)."""
        buf = self._key_buffer
        return (buf is not None and self.keys.numel() > 0 and self.keys.data_ptr() == buf.data_ptr()
                and self.keys.shape[:2] == buf.shape[:2] and self.values.data_ptr() == self._value_buffer.data_ptr())

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append (B, H, T, D) keys and values; returns views (B, H, L + T, D) of everything cached."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, new = self.get_seq_length(), key_states.shape[-2]
        if not self._backed() or n + new > self._key_buffer.shape[-2]:  # (re)allocate with room to grow
            capacity = max(2 * (n + new), 16)
            keys = key_states.new_empty((*key_states.shape[:2], capacity, key_states.shape[-1]))  # (B, H, cap, D)
            values = value_states.new_empty((*value_states.shape[:2], capacity, value_states.shape[-1]))
            if n:
                keys[:, :, :n] = self.keys
                values[:, :, :n] = self.values
            self._key_buffer, self._value_buffer = keys, values
        self._key_buffer[:, :, n : n + new] = key_states
        self._value_buffer[:, :, n : n + new] = value_states
        self.keys = self._key_buffer[:, :, : n + new]  # (B, H, L + T, D) view
        self.values = self._value_buffer[:, :, : n + new]
        return self.keys, self.values

    def reset(self) -> None:
        self._key_buffer = self._value_buffer = None
        super().reset()


def growing_cache() -> Cache:
    """An empty KV cache of :class:`GrowingLayer` layers (one made per model layer on first use)."""
    return Cache(layer_class_to_replicate=GrowingLayer)
