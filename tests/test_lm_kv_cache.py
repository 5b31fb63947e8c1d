"""The in-place growing KV cache: the same keys / values as transformers' DynamicLayer through appends, crops and
batch repeat / select, and the same logits from a real (tiny) Llama fed chunk by chunk."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicLayer

from ad.lm.kv_cache import GrowingLayer, growing_cache


def test_layer_matches_dynamic_cache_through_appends_crops_and_batch_ops():
    g = torch.Generator().manual_seed(0)
    ours, ref = GrowingLayer(), DynamicLayer()
    steps = [("update", 5), ("update", 1), ("update", 30), ("crop", 3), ("update", 2), ("repeat", 3),
             ("update", 1), ("crop", 1), ("select", None), ("update", 40), ("update", 1)]
    batch = 2
    for op, n in steps:
        if op == "update":
            k, v = torch.randn(batch, 2, n, 4, generator=g), torch.randn(batch, 2, n, 4, generator=g)
            got, want = ours.update(k, v), ref.update(k, v)
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b, rtol=0, atol=0)
        elif op == "crop":
            ours.crop(-n)
            ref.crop(-n)
        elif op == "repeat":
            ours.batch_repeat_interleave(n)
            ref.batch_repeat_interleave(n)
            batch *= n
        else:
            idx = torch.arange(0, batch, 3)
            ours.batch_select_indices(idx)
            ref.batch_select_indices(idx)
            batch = len(idx)
        assert ours.get_seq_length() == ref.get_seq_length()


def test_single_token_appends_rarely_reallocate():
    layer, reallocations = GrowingLayer(), 0
    k = torch.zeros(2, 2, 10, 4)
    layer.update(k, k)
    for _ in range(300):  # one token a step, as acting appends
        buffer = layer._key_buffer
        layer.update(k[:, :, :1], k[:, :, :1])
        reallocations += layer._key_buffer is not buffer
    assert layer.get_seq_length() == 310
    assert reallocations <= 5  # capacity doubles: 20 -> 40 -> ... -> 640, not one copy per step


def test_llama_logits_chunk_by_chunk_equal_one_forward():
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 50, (3, 60))
    with torch.no_grad():
        full = model(input_ids=ids).logits
        cache, pieces, i = growing_cache(), [], 0
        for n in (7, 1, 1, 20, 1, 30):
            pieces.append(model(input_ids=ids[:, i:i + n], cache=cache, use_cache=True).logits)
            i += n
    torch.testing.assert_close(torch.cat(pieces, 1), full, atol=1e-5, rtol=1e-5)
