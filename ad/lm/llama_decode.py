"""One-token decode steps of a Llama-architecture causal LM without the ``transformers`` forward: what the group
sampler (:mod:`tasks.lm_sampling`) decodes with on a CPU when the model allows it (SmolLM2 is a Llama).

A decode step reads one token a row. On a CPU, the ``transformers`` forward spends about as much again as the
weight products themselves: PyTorch's fused attention kernel is built for long queries and costs ~1-3 ms a layer for
one query over a short cache, the KV cache is a Python object updated layer by layer, a mask is rebuilt every step
and every projection is its own product. :class:`LlamaDecoder` does the same arithmetic with

* the query / key / value projections in one product and the gate / up projections in another (weights
  concatenated once per decoder), bfloat16 weights reordered once into oneDNN's blocked layout
  (:func:`prepacked_linear`) instead of on every product;
* a prompt's keys / values held once for all the rows sampled from it (``generate`` copies them to every row), and
  attended over with one product per prompt for the whole group (the group's queries stacked), so a step reads
  each prompt's cache once; each row's own generated tokens in float32 buffers preallocated for the whole
  completion and written in place;
* attention for one query token as small batched products in float32 (the query heads sharing a key head
  grouped, no key repetition), the scaling and the prompts' padding mask folded into the first product;
* each RMSNorm as one call of PyTorch's ``rms_norm`` in float32 with the module's own weight and epsilon (the
  arithmetic of ``transformers``' ``LlamaRMSNorm``, with fewer calls from Python);
* the model's own embedding, rotary-embedding and activation modules and ``transformers``' own ``rotate_half``, so
  their definitions are not copied.

The prompt is read by the model's own forward (:meth:`LlamaDecoder.prefill`); only decode steps take this path.
PEFT LoRA adapters are applied as PEFT applies them: the base product in the model's dtype plus the adapters'
low-rank products in theirs (float32 adapters over bfloat16 weights stay float32: merging them into bfloat16 weights
would round small updates away), the adapters of fused projections in one block-diagonal product. The decoder
reads the weights when it is built: build a new one after they change. Any other layer type keeps the model on
its own forward (:func:`supports`).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import rotate_half

from ad.lm.scoring import base_model


class Unsupported(ValueError):
    """A layer :class:`LlamaDecoder` cannot reproduce exactly."""


def linear_parts(layer: Any) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor, float]]]:
    """(weight (out, in), [(A (r, in), B (out, r), scaling) of each active LoRA adapter]) of a bias-free linear layer:
    a plain ``nn.Linear`` or one wrapped by PEFT's LoRA (merged or disabled adapters: the base weight alone).
    Raises :class:`Unsupported` for anything else (biases, DoRA and other LoRA variants, other wrappers)."""
    if type(layer) is torch.nn.Linear:
        if layer.bias is not None:
            raise Unsupported("a linear layer with a bias")
        return layer.weight, []
    needed = ("base_layer", "lora_A", "lora_B", "scaling", "active_adapters", "merged", "disable_adapters")
    if not all(hasattr(layer, n) for n in needed):
        raise Unsupported(f"a {type(layer).__name__} layer")
    base = layer.base_layer
    if type(base) is not torch.nn.Linear or base.bias is not None:
        raise Unsupported(f"a LoRA layer over a {type(base).__name__}")
    if layer.disable_adapters or layer.merged:
        return base.weight, []
    adapters = []
    for name in layer.active_adapters:
        if name not in layer.lora_A:
            continue
        if name in getattr(layer, "lora_variant", {}) or layer.lora_B[name].bias is not None:
            raise Unsupported("a LoRA variant (e.g. DoRA) or a LoRA bias")
        adapters.append((layer.lora_A[name].weight, layer.lora_B[name].weight, float(layer.scaling[name])))
    return base.weight, adapters


def prepacked_linear(weight: torch.Tensor) -> Any:
    """A product ``x -> F.linear(x, weight)`` for a bfloat16 CPU ``weight`` (out, in) whose weight is reordered once
    into oneDNN's blocked layout, or None where that is not available (another dtype or device, a PyTorch without
    oneDNN's bfloat16 kernels) or does not give ``F.linear``'s result exactly on a probe input.

    ``F.linear`` in bfloat16 on a CPU reorders the weight into that layout on every call; in a decode step the
    products are small (one row per sample) and the weights do not stay in cache between steps, so the reordering
    costs about half as much again as the products (the math experiment page has the measurement). It is the oneDNN
    operator PyTorch's own compiler uses for linear layers of frozen weights (``mkldnn::_reorder_linear_weight`` /
    ``mkldnn::_linear_pointwise``)."""
    if weight.dtype != torch.bfloat16 or weight.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return None
    try:
        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return None
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())
        linear = torch.ops.mkldnn._linear_pointwise

        def product(x: torch.Tensor) -> torch.Tensor:
            return linear(x, packed, None, "none", [], "")  # (..., in) -> (..., out)

        probe = torch.randn((3, weight.size(1)), generator=torch.Generator().manual_seed(0)).to(weight.dtype)
        if not torch.equal(product(probe), F.linear(probe, weight.detach())):
            return None
    except (AttributeError, RuntimeError, NotImplementedError):
        return None
    return product


class FusedLinear:
    """Bias-free linear layers reading the same input, applied as one product (weights concatenated along the
    output; prepacked where :func:`prepacked_linear` allows), their LoRA adapters beside it as two small products in
    the adapters' dtype, added before the result is cast back, as PEFT adds them (``base(x) + B(A(x)) * scaling``)."""

    def __init__(self, layers: list[Any]):
        parts = [linear_parts(layer) for layer in layers]
        self.weight = parts[0][0] if len(parts) == 1 else torch.cat([w for w, _ in parts])  # (sum out, in)
        self.product = prepacked_linear(self.weight)
        adapters = [(i, a) for i, (_, found) in enumerate(parts) for a in found]
        self.down = self.up = None
        if adapters:
            self.down = torch.cat([a for _, (a, _, _) in adapters]).detach()  # (sum r, in)
            outs = [w.size(0) for w, _ in parts]
            starts = [sum(outs[:i]) for i in range(len(outs))]
            self.up = self.down.new_zeros((sum(outs), self.down.size(0)))  # (sum out, sum r) block-diagonal
            r0 = 0
            for i, (_, b, scaling) in adapters:
                self.up[starts[i]: starts[i] + outs[i], r0: r0 + b.size(1)] = b.detach() * scaling
                r0 += b.size(1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(B, in) -> (B, sum out), in ``x``'s dtype."""
        y = F.linear(x, self.weight) if self.product is None else self.product(x)
        if self.down is None:
            return y
        low = F.linear(F.linear(x.to(self.down.dtype), self.down), self.up)  # (B, sum out), the adapters' dtype
        return (y + low).to(y.dtype)


def supports(model: Any) -> bool:
    """Whether :class:`LlamaDecoder` reproduces ``model``'s forward: a ``transformers`` Llama without biases and
    without tensor-parallel slicing, attending with SDPA or eager attention, its linear layers plain or with
    PEFT LoRA adapters."""
    base = base_model(model)
    config = getattr(base, "config", None)
    if config is None or getattr(config, "model_type", None) != "llama":
        return False
    inner = getattr(base, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if not (inner is not None and all(hasattr(inner, n) for n in needed)
            and not getattr(config, "attention_bias", False) and not getattr(config, "mlp_bias", False)
            and getattr(config, "pretraining_tp", 1) in (None, 1)
            and getattr(config, "_attn_implementation", "sdpa") in ("sdpa", "eager")):
        return False
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    norms = [inner.norm] + [norm for layer in inner.layers
                            for norm in (layer.input_layernorm, layer.post_attention_layernorm)]
    if not all(type(norm) is LlamaRMSNorm for norm in norms):
        return False
    try:
        for layer in inner.layers:
            for module in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                           layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj):
                linear_parts(module)
        linear_parts(base.get_output_embeddings())
    except (Unsupported, AttributeError):
        return False
    return True


def rms_norm(norm: Any, x: torch.Tensor) -> torch.Tensor:
    """``transformers``' ``LlamaRMSNorm`` ``norm`` applied to ``x`` (..., D): normalised in float32, cast back to
    ``x``'s dtype, then scaled by the module's weight. PyTorch's kernel computes a bfloat16 input in float32 and
    rounds once, the same result without the two casts (tests compare the two)."""
    if x.dtype == torch.bfloat16:
        return norm.weight * F.rms_norm(x, (x.size(-1),), eps=norm.variance_epsilon)
    return norm.weight * F.rms_norm(x.float(), (x.size(-1),), eps=norm.variance_epsilon).to(x.dtype)


class LlamaDecoder:
    """Decode state of a batch of rows for a Llama model (see the module docstring).

    :meth:`prefill` reads the prompts, :meth:`step` appends one token a row and returns the next-token logits,
    :meth:`select` keeps a subset of the rows. Rows are grouped by prompt (the rows of one prompt consecutive) and
    a prompt's keys / values are held once for its whole group: each step attends over them with one product per
    prompt for all its rows (the rows laid out on a grid of prompts x rows, padded where groups have lost rows),
    then over each row's own generated tokens. Positions are per row (left-padded prompts start at position 0 at
    their first real token)."""

    @torch.no_grad()
    def __init__(self, model: Any):
        if not supports(model):
            raise Unsupported("LlamaDecoder needs a transformers Llama model without biases, its linear layers plain "
                              "or with LoRA adapters (see supports())")
        self.model = model
        base = base_model(model)
        config = base.config
        self.inner = base.model
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.scale = self.head_dim ** -0.5
        from transformers.activations import ACT2FN

        self.act = ACT2FN[config.hidden_act]
        self.qkv, self.out, self.gate_up, self.down = [], [], [], []
        for layer in self.inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            self.qkv.append(FusedLinear([attn.q_proj, attn.k_proj, attn.v_proj]))  # D -> (H + 2 Hkv) hd
            self.out.append(FusedLinear([attn.o_proj]))  # H hd -> D
            self.gate_up.append(FusedLinear([mlp.gate_proj, mlp.up_proj]))  # D -> 2 I
            self.down.append(FusedLinear([mlp.down_proj]))  # I -> D
        self.head = FusedLinear([base.get_output_embeddings()])  # D -> V
        self.prompt_keys: list[torch.Tensor] = []  # per layer (P, Hkv, Lp, hd) float32
        self.prompt_values: list[torch.Tensor] = []
        self.own_keys: list[torch.Tensor] = []  # per layer (B, Hkv, capacity, hd) float32
        self.own_values: list[torch.Tensor] = []
        self.length = 0  # generated tokens held per row

    @torch.no_grad()
    def prefill(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, repeat: int,
                capacity: int) -> torch.Tensor:
        """Read left-padded prompts (P, L) with the model's own forward, for ``repeat`` rows each (rows
        p * repeat ... p * repeat + repeat - 1 continue prompt p), with room for ``capacity`` generated tokens.
        Returns the last position's logits (P * repeat, V), float32."""
        from transformers import DynamicCache

        cache = DynamicCache()
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                         logits_to_keep=1)
        prompts, rows = ids.size(0), ids.size(0) * repeat
        self.prompt_keys = [layer.keys.float() for layer in cache.layers]  # (P, Hkv, Lp, hd)
        self.prompt_values = [layer.values.float() for layer in cache.layers]
        shape = (rows, self.kv_heads, capacity, self.head_dim)
        self.own_keys = [torch.empty(shape, dtype=torch.float32, device=ids.device) for _ in cache.layers]
        self.own_values = [torch.empty(shape, dtype=torch.float32, device=ids.device) for _ in cache.layers]
        self.length = 0
        self._group(torch.arange(prompts, device=ids.device).repeat_interleave(repeat), mask.bool())
        return out.logits[:, -1].float().repeat_interleave(repeat, 0)

    def _group(self, row_prompt: torch.Tensor, prompt_mask: torch.Tensor) -> None:
        """Lay rows (B,) of prompts ``row_prompt`` (sorted; indices into the held prompts) on the prompt x row
        grid; prompts without rows are dropped. ``prompt_mask`` (P, Lp): the prompts' real (not padded) tokens."""
        live, row_prompt, counts = torch.unique_consecutive(row_prompt, return_inverse=True, return_counts=True)
        if live.numel() != len(self.prompt_keys[0]):
            self.prompt_keys = [k.index_select(0, live) for k in self.prompt_keys]
            self.prompt_values = [v.index_select(0, live) for v in self.prompt_values]
            prompt_mask = prompt_mask.index_select(0, live)
        prompts, length = prompt_mask.shape
        starts = torch.cumsum(counts, 0) - counts  # (P,) first row of each prompt
        self.width = int(counts.max())  # rows a prompt holds on the grid
        self.full = bool((counts == self.width).all())  # every cell of the grid holds a row: no scatter / gather
        slot = torch.arange(len(row_prompt), device=row_prompt.device) - starts[row_prompt]  # (B,)
        self.grid_index = row_prompt * self.width + slot  # (B,) cell of each row on the (P x width) grid
        self.prompt_mask = prompt_mask
        bias = torch.zeros(prompt_mask.shape, dtype=torch.float32, device=prompt_mask.device)
        bias = bias.masked_fill(~prompt_mask, float("-inf"))  # (P, Lp): 0 on real tokens, -inf on padding
        self.prompt_bias = bias[:, None, None, :].expand(prompts, self.kv_heads, 1, length).reshape(
            prompts * self.kv_heads, 1, length)  # (P Hkv, 1, Lp)
        self.row_prompt = row_prompt

    def select(self, keep: torch.Tensor) -> None:
        """Keep only rows ``keep`` (K,), increasing, of the batch."""
        self.own_keys = [k.index_select(0, keep) for k in self.own_keys]
        self.own_values = [v.index_select(0, keep) for v in self.own_values]
        self._group(self.row_prompt.index_select(0, keep), self.prompt_mask)

    def _attend(self, i: int, q: torch.Tensor) -> torch.Tensor:
        """Attention of layer ``i`` for queries (B, Hkv, G, hd) float32 (G query heads per key head) over each
        row's prompt and its generated tokens so far; returns (B, Hkv G hd)."""
        b, hk, g, hd = q.shape
        p, w, n = len(self.prompt_keys[i]), self.width, self.length
        lp, cap = self.prompt_keys[i].size(2), self.own_keys[i].size(2)
        q = q * self.scale  # the scaling folded into the queries
        # each row's own keys / values so far, one (n, hd) matrix per row and key head: (B Hkv, n, hd) views
        own_keys = self.own_keys[i].view(b * hk, cap, hd)[:, :n]
        own_values = self.own_values[i].view(b * hk, cap, hd)[:, :n]
        on_own = torch.bmm(q.view(b * hk, g, hd), own_keys.transpose(1, 2)).view(b, hk, g, n)  # (B, Hkv, G, n)
        if not self.full:  # rows -> grid cells, empty cells zero
            q = q.new_zeros((p * w, hk, g, hd)).index_put_((self.grid_index,), q)
        grid = q.view(p, w, hk, g, hd).transpose(1, 2).reshape(p * hk, w * g, hd)  # (P Hkv, w G, hd)
        on_prompt = torch.baddbmm(self.prompt_bias, grid, self.prompt_keys[i].view(p * hk, lp, hd).transpose(1, 2))
        on_prompt = on_prompt.view(p, hk, w, g, lp).transpose(1, 2)  # (P, w, Hkv, G, Lp) view, padding -inf
        if not self.full:
            on_prompt = on_prompt.reshape(p * w, hk, g, lp)[self.grid_index]  # (B, Hkv, G, Lp)
        weights = torch.cat([on_prompt.reshape(b, hk, g, lp), on_own], -1).softmax(-1)  # (B, Hkv, G, Lp + n)
        to_prompt, to_own = weights.split([lp, n], -1)
        if not self.full:
            to_prompt = to_prompt.new_zeros((p * w, hk, g, lp)).index_put_((self.grid_index,), to_prompt)
        cells = to_prompt.reshape(p, w, hk, g, lp).transpose(1, 2).reshape(p * hk, w * g, lp)  # (P Hkv, w G, Lp)
        from_prompt = torch.bmm(cells, self.prompt_values[i].view(p * hk, lp, hd))  # (P Hkv, w G, hd)
        from_prompt = from_prompt.view(p, hk, w, g, hd).transpose(1, 2)  # (P, w, Hkv, G, hd) view
        from_own = torch.bmm(to_own.reshape(b * hk, g, n), own_values).view(b, hk, g, hd)  # (B, Hkv, G, hd)
        if self.full:
            return (from_own.view(p, w, hk, g, hd) + from_prompt).reshape(b, hk * g * hd)
        return (from_own + from_prompt.reshape(p * w, hk, g, hd)[self.grid_index]).reshape(b, hk * g * hd)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Append tokens (B,) at positions (B,); returns the next-token logits (B, V), float32."""
        b, n = tokens.size(0), self.length
        if n >= self.own_keys[0].size(2):
            raise ValueError(f"decoder full: {n} generated tokens held, room for {self.own_keys[0].size(2)}")
        h, hk, hd = self.heads, self.kv_heads, self.head_dim
        x = self.inner.embed_tokens(tokens)  # (B, D)
        cos, sin = self.inner.rotary_emb(x, positions[:, None])  # (B, 1, hd) each, model dtype
        self.length = n + 1  # the new token attends to itself
        for i, layer in enumerate(self.inner.layers):
            qkv = self.qkv[i](rms_norm(layer.input_layernorm, x))  # (B, (H + 2 Hkv) hd)
            qk, v = qkv.view(b, h + 2 * hk, hd).split([h + hk, hk], 1)  # (B, H + Hkv, hd), (B, Hkv, hd)
            qk = qk * cos + rotate_half(qk) * sin  # rotary embedding of queries and keys, as transformers' Llama
            self.own_keys[i][:, :, n] = qk[:, h:]
            self.own_values[i][:, :, n] = v
            attended = self._attend(i, qk[:, :h].float().view(b, hk, h // hk, hd))  # (B, H hd)
            x = x + self.out[i](attended.to(x.dtype))
            gate, up = self.gate_up[i](rms_norm(layer.post_attention_layernorm, x)).chunk(2, -1)  # (B, I) each
            x = x + self.down[i](self.act(gate) * up)
        return self.head(rms_norm(self.inner.norm, x)).float()  # (B, V)
