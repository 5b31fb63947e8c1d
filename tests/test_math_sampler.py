"""The batched group sampler (tasks.lm_sampling) against transformers' ``generate`` on a tiny random LM: the same
greedy tokens, the same sampling distribution, logprobs equal to a full recompute, rows stopping at EOS."""
import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchmarks.helpers.tiny_lm import build_tiny
    import tempfile
    from pathlib import Path

    folder = build_tiny(Path(tempfile.mkdtemp()) / "tiny", n_layer=2, width=32)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():  # a peaked distribution, so that a wrong sampler shows in the frequencies
        model.get_input_embeddings().weight.mul_(8.0)
    return model, AutoTokenizer.from_pretrained(folder)


def _prompts(tok):
    return [tok("Question: 3 apples\nAnswer:")["input_ids"], tok("Q: ab")["input_ids"],
            tok("Tom has 12 marbles. How many?")["input_ids"]]


def _hf(model, tok, prompts, g, new, eos, **kw):
    from tasks.lm_sampling import left_pad

    ids, mask, _ = left_pad(prompts, tok.pad_token_id)
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, num_return_sequences=g,
                         pad_token_id=tok.pad_token_id, eos_token_id=list(eos), top_k=0, **kw)
    rows = []
    for row in out[:, ids.size(1):].tolist():  # cut each row after its first EOS
        cut = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        rows.append(row[:cut])
    return rows


@pytest.mark.parametrize("fast_decode", [True, False])  # the Llama decoder, and the model's own forward
def test_greedy_tokens_equal_generate_with_rows_stopping_at_eos(tiny, fast_decode):
    from tasks.lm_sampling import sample_groups

    model, tok = tiny
    prompts = _prompts(tok)
    eos = {tok.eos_token_id, *tok.convert_tokens_to_ids(list(":b"))}  # two of three prompts stop at once
    ours = sample_groups(model, prompts, 2, 24, eos_ids=eos, pad_id=tok.pad_token_id, greedy=True,
                         fast_decode=fast_decode)
    ref = _hf(model, tok, [p for p in prompts for _ in range(2)], 1, 24, eos, do_sample=False)
    assert ours.tokens == ref
    assert any(ours.terminated) and len({len(t) for t in ours.tokens}) > 1  # EOS stopped rows at several lengths
    assert ours.terminated == [t[-1] in eos for t in ours.tokens]


@pytest.mark.parametrize("fast_decode", [True, False])
def test_logprobs_equal_a_full_recompute(tiny, fast_decode):
    from tasks.lm_sampling import sample_groups

    model, tok = tiny
    prompts = _prompts(tok)
    eos = {tok.eos_token_id, *tok.convert_tokens_to_ids(list("ae"))}
    got = sample_groups(model, prompts, 3, 16, eos_ids=eos, pad_id=tok.pad_token_id, temperature=0.7,
                        generator=torch.Generator().manual_seed(0), fast_decode=fast_decode)
    for i, (tokens, logps) in enumerate(zip(got.tokens, got.logprobs)):
        prompt = prompts[i // 3]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1:-1].float() / 0.7  # (C, V)
        want = logits.log_softmax(-1).gather(1, torch.tensor(tokens)[:, None])[:, 0]
        np.testing.assert_allclose(logps.numpy(), want.numpy(), atol=1e-4)


def _chi2_p(a: np.ndarray, b: np.ndarray) -> float:
    """p-value of a two-sample chi-square test that counts ``a`` and ``b`` come from one distribution."""
    from scipy.stats import chi2_contingency

    keep = (a + b) >= 10
    table = np.stack([np.append(a[keep], a[~keep].sum()), np.append(b[keep], b[~keep].sum())])
    table = table[:, table.sum(0) > 0]
    return float(chi2_contingency(table)[1])


@pytest.mark.parametrize("fast_decode", [True, False])
@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_sampled_token_frequencies_agree_with_generate(tiny, top_p, fast_decode):
    from tasks.lm_sampling import sample_groups

    model, tok = tiny
    prompt = [tok("Ava has 7 apples.")["input_ids"]]
    eos = {tok.eos_token_id, *tok.convert_tokens_to_ids(list("aeiou"))}
    n, vocab = 1500, len(tok)
    torch.manual_seed(1)
    ours = sample_groups(model, prompt, n, 2, eos_ids=eos, pad_id=tok.pad_token_id, temperature=0.7, top_p=top_p,
                         generator=torch.Generator().manual_seed(2), fast_decode=fast_decode).tokens
    ref = _hf(model, tok, prompt, n, 2, eos, do_sample=True, temperature=0.7, top_p=top_p)
    for position in (0, 1):  # the first token, and the second of rows that did not stop
        a = np.bincount([r[position] for r in ours if len(r) > position], minlength=vocab)
        b = np.bincount([r[position] for r in ref if len(r) > position], minlength=vocab)
        assert a.sum() > 300 and b.sum() > 300
        assert _chi2_p(a, b) > 1e-3, (position, a.nonzero(), b.nonzero())
    # and a sampler that is off (a different temperature) fails the same test: the test can fail
    off = sample_groups(model, prompt, n, 1, eos_ids=eos, pad_id=tok.pad_token_id, temperature=1.4, top_p=top_p,
                        generator=torch.Generator().manual_seed(3)).tokens
    a = np.bincount([r[0] for r in off], minlength=vocab)
    b = np.bincount([r[0] for r in ref], minlength=vocab)
    assert _chi2_p(a, b) < 1e-3


@pytest.mark.parametrize("block", [2, 3, 256])  # several blocks, padded blocks, one block
def test_categorical_draw_frequencies_match_the_probabilities(block):
    from scipy.stats import chisquare

    from tasks.lm_sampling import draw_categorical

    probs = torch.tensor([0.0, 0.5, 0.0, 0.2, 0.25, 0.05, 0.0])  # zeros first, inside and last
    n = 40000
    draws = draw_categorical(probs.expand(n, -1), torch.Generator().manual_seed(0), block=block)
    counts = np.bincount(draws.numpy(), minlength=len(probs))
    assert len(counts) == len(probs)
    assert counts[probs.numpy() == 0].sum() == 0  # a zero-probability index is never drawn
    keep = probs.numpy() > 0
    assert chisquare(counts[keep], n * probs.numpy()[keep]).pvalue > 1e-3
    skewed = torch.tensor([0.0, 0.45, 0.0, 0.25, 0.25, 0.05, 0.0])  # the test can fail: another distribution
    assert chisquare(counts[keep], n * skewed.numpy()[keep]).pvalue < 1e-3
    same = draw_categorical(probs.expand(n, -1), torch.Generator().manual_seed(0), block=block)
    assert torch.equal(draws, same)  # reproducible from the generator


def test_categorical_draw_per_row_over_a_large_vocabulary():
    from scipy.stats import chisquare

    from tasks.lm_sampling import draw_categorical

    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 1000, generator=gen) * 2
    logits[0, 300:] = float("-inf")  # row 0: whole zero blocks after index 300
    logits[1, ::7] = float("-inf")  # row 1: zeros scattered through every block
    probs = logits.softmax(-1)
    n = 60000
    draws = draw_categorical(probs.repeat(n, 1), gen, block=64).view(n, 2)
    for row in range(2):
        counts = np.bincount(draws[:, row].numpy(), minlength=1000)
        p = probs[row].double().numpy()
        p = p / p.sum()
        assert counts[p == 0].sum() == 0
        common = p * n >= 20  # chi-square on the entries with enough expected draws, the rest pooled
        observed = np.append(counts[common], counts[~common].sum())
        expected = np.append(p[common], p[~common].sum()) * n
        assert chisquare(observed, expected).pvalue > 1e-3
        sharper = p ** 1.1 / (p ** 1.1).sum()  # the test can fail: a slightly sharper distribution
        assert chisquare(observed, np.append(sharper[common], sharper[~common].sum()) * n).pvalue < 1e-3


def test_top_p_filter_matches_transformers():
    from transformers.generation.logits_process import TopPLogitsWarper

    from tasks.lm_sampling import filter_top_p

    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0)) * 3
    for p in (0.3, 0.9):
        want = TopPLogitsWarper(p)(torch.zeros(4, 1, dtype=torch.long), logits.clone())
        assert torch.equal(torch.isinf(filter_top_p(logits, p)), torch.isinf(want))
