"""The Llama decode path (ad.lm.llama_decode) against the model's own forward: the same next-token logits step by
step, with groups sharing a prompt, rows dropped mid-way, and LoRA adapters merged."""
import pytest
import torch


@pytest.fixture(scope="module")
def tiny():
    import tempfile
    from pathlib import Path

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchmarks.helpers.tiny_lm import build_tiny

    folder = build_tiny(Path(tempfile.mkdtemp()) / "tiny", n_layer=2, width=32, heads=4, kv_heads=2)  # grouped queries
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def _compare(model, tok, keep_after=None):
    """Max |logit difference| between the decoder and the model's forward over 6 greedy steps, 3 prompts x 2 rows."""
    from ad.lm.kv_cache import growing_cache
    from ad.lm.llama_decode import LlamaDecoder
    from tasks.lm_sampling import left_pad

    prompts = [tok("Tom has 12 marbles.")["input_ids"], tok("Q: ab")["input_ids"], tok("x = 3 + 4")["input_ids"]]
    ids, mask, positions = left_pad(prompts, tok.pad_token_id)
    g, worst = 2, 0.0
    decoder = LlamaDecoder(model)
    ours = decoder.prefill(ids, mask, positions, g, 8)
    with torch.no_grad():
        cache = growing_cache()
        ref = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                    logits_to_keep=1).logits[:, -1].float().repeat_interleave(g, 0)
        cache.batch_repeat_interleave(g)
        mask, position = mask.repeat_interleave(g, 0), positions[:, -1].repeat_interleave(g) + 1
        for step in range(6):
            worst = max(worst, float((ours - ref).abs().max()))
            token = ref.argmax(-1)
            if keep_after is not None and step == keep_after:  # drop rows: a whole group and one row of another
                keep = torch.tensor([1, 4, 5])
                decoder.select(keep)
                cache.batch_select_indices(keep)
                token, mask, position = token[keep], mask[keep], position[keep]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
            ref = model(input_ids=token[:, None], attention_mask=mask, position_ids=position[:, None], cache=cache,
                        use_cache=True, logits_to_keep=1).logits[:, -1].float()
            ours = decoder.step(token, position)
            position = position + 1
    return worst


def test_decoder_logits_equal_the_model_forward(tiny):
    assert _compare(*tiny) < 1e-4


def test_decoder_logits_equal_after_rows_leave(tiny):
    assert _compare(*tiny, keep_after=2) < 1e-4


def test_decoder_applies_lora_adapters(tiny):
    from peft import LoraConfig, get_peft_model

    from ad.lm.llama_decode import LlamaDecoder

    model, tok = tiny
    import copy

    peft = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():  # LoRA's B starts at zero: make the adapters change the function
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    peft.eval()
    assert _compare(peft, tok) < 1e-4
    assert LlamaDecoder(model).qkv[0].up is None and LlamaDecoder(peft).qkv[0].up is not None  # adapters read


def test_supports_only_llama_without_biases(tiny):
    from transformers import GPT2Config, GPT2LMHeadModel

    from ad.lm.llama_decode import LlamaDecoder, supports

    assert supports(tiny[0])
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    assert not supports(gpt2)
    with pytest.raises(ValueError):
        LlamaDecoder(gpt2)


def test_decoder_follows_peft_with_float32_adapters_over_bfloat16_weights(tiny):
    """bfloat16 base weights, float32 LoRA adapters (the cpu preset's setting): the decoder's logits follow PEFT's
    forward to within bfloat16 rounding, far closer than the base model without the adapters."""
    import copy

    from peft import LoraConfig, get_peft_model

    model, tok = tiny
    low = copy.deepcopy(model).to(torch.bfloat16)
    peft = get_peft_model(low, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    assert next(p for n, p in peft.named_parameters() if "lora_A" in n).dtype == torch.float32
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 3e-2)
    peft.eval()
    from ad.lm.llama_decode import LlamaDecoder
    from tasks.lm_sampling import left_pad

    ids, mask, positions = left_pad([tok("Tom has 12 marbles.")["input_ids"]], tok.pad_token_id)
    with torch.no_grad():
        want = peft(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1].float()
        with peft.disable_adapter():
            base = peft(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1].float()
    decoder = LlamaDecoder(peft)
    decoder.prefill(ids[:, :-1], mask[:, :-1], positions[:, :-1], 1, 4)
    got = decoder.step(ids[:, -1], positions[:, -1])
    moved = float((want - base).abs().max())
    assert moved > 0.05  # the adapters change the logits
    assert float((got - want).abs().max()) < 0.05 * moved


def _bf16_kernels() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


@pytest.mark.skipif(not _bf16_kernels(), reason="no oneDNN bfloat16 kernels on this CPU")
def test_prepacked_product_equals_linear_for_any_row_count():
    """The prepacked bfloat16 product gives F.linear's result exactly, whatever the rows (rows leave the batch as
    samples end), 2-d or 3-d; float32 weights keep F.linear."""
    from ad.lm.llama_decode import prepacked_linear

    g = torch.Generator().manual_seed(0)
    weight = (torch.randn((96, 40), generator=g) * 0.1).to(torch.bfloat16)
    product = prepacked_linear(weight)
    assert product is not None
    for shape in ((1, 40), (5, 40), (32, 40), (3, 7, 40)):
        x = torch.randn(shape, generator=g).to(torch.bfloat16)
        assert torch.equal(product(x), torch.nn.functional.linear(x, weight))
    assert prepacked_linear(weight.float()) is None


@pytest.mark.skipif(not _bf16_kernels(), reason="no oneDNN bfloat16 kernels on this CPU")
def test_bfloat16_decoder_uses_prepacked_products_and_follows_the_forward(tiny):
    """A bfloat16 model's decoder takes the prepacked products for every projection and the output head, and its
    logits stay within bfloat16 rounding of the model's own forward step by step."""
    import copy

    from ad.lm.llama_decode import LlamaDecoder

    model, tok = tiny
    low = copy.deepcopy(model).to(torch.bfloat16)
    decoder = LlamaDecoder(low)
    fused = decoder.qkv + decoder.out + decoder.gate_up + decoder.down + [decoder.head]
    assert all(f.product is not None for f in fused)
    assert _compare(low, tok, keep_after=2) < 0.02  # bfloat16 rounding: ~0.004 here; the logits spread ~0.12


def test_rms_norm_of_bfloat16_equals_the_float32_route():
    """rms_norm skips the float32 casts for bfloat16 inputs: the result equals transformers' route (normalise in
    float32, round once, scale) exactly, at small, unit and large scales."""
    from types import SimpleNamespace

    from ad.lm.llama_decode import rms_norm

    g = torch.Generator().manual_seed(0)
    for width, size in ((64, 0.01), (576, 1.0), (1536, 30.0)):
        norm = SimpleNamespace(weight=torch.randn(width, generator=g).to(torch.bfloat16), variance_epsilon=1e-5)
        x = (torch.randn((16, width), generator=g) * size).to(torch.bfloat16)
        want = norm.weight * torch.nn.functional.rms_norm(x.float(), (width,), eps=1e-5).to(torch.bfloat16)
        assert torch.equal(rms_norm(norm, x), want)
