"""The shared valid-action scorer (ad.lm.scoring) against a plain full forward pass per action on a tiny random
Llama: contexts of different lengths in one cache, a shared opening, extensions, dropped contexts, candidates of
one and several tokens sharing prefixes, with transformers' cache and the growing one."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from ad.lm.kv_cache import growing_cache
from ad.lm.scoring import CachedContexts, full_recompute

VOCAB, PAD = 40, 0


@pytest.fixture(scope="module")
def model():
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


def plain(model, context, action):
    """(n,) log p of each action token after the context: one forward of context + action, nothing cached."""
    ids = torch.tensor([list(context) + list(action)])  # (1, P + n)
    logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)  # (P + n, V)
    return torch.stack([logp[len(context) - 1 + j, tok] for j, tok in enumerate(action)])


def check(model, contexts, hidden, texts, actions):
    """Scores of every context's actions (after its newest ``hidden`` state) equal the plain forward; scoring
    leaves the cache as it was."""
    length = contexts.cache.get_seq_length()
    first = contexts.next_logp(hidden)
    scores, per = contexts.score(first, actions)
    table = contexts.score_table(first, actions)
    assert contexts.cache.get_seq_length() == length
    for b, (text, acts) in enumerate(zip(texts, actions)):
        for a, action in enumerate(acts):
            ref = plain(model, text, action)
            torch.testing.assert_close(per[b][a], ref, atol=1e-5, rtol=1e-5)
            assert float(scores[b][a]) == pytest.approx(float(ref.sum()), abs=1e-5)
            assert float(table[b, a]) == pytest.approx(float(ref.sum()), abs=1e-5)
        assert bool(torch.isinf(table[b, len(acts):]).all())  # past a context's own actions


@pytest.mark.parametrize("cache", ["dynamic", "growing"])
def test_cached_scores_equal_a_plain_forward_per_action(model, cache):
    g = torch.Generator().manual_seed(1)
    opening = torch.randint(1, VOCAB, (9,), generator=g).tolist()
    texts = [opening + torch.randint(1, VOCAB, (n,), generator=g).tolist() for n in (3, 11, 1)]  # shared opening
    actions = [[[5], [6, 7], [6, 8, 9], [6, 7, 2]],  # prefixes shared, one- and several-token actions
               [[3], [4]],  # one token each: no node fed
               [[9, 9, 9, 9], [1, 2]]]
    with torch.no_grad():
        contexts = CachedContexts(model, PAD, len(texts), growing_cache() if cache == "growing" else None)
        hidden = contexts.start(texts)
        assert contexts.cache.get_seq_length() == 9 + 11  # the opening once, then the longest tail
        check(model, contexts, hidden, texts, actions)
        shared = [[3], [5], [8]]  # one discrete action set for every context: a single gather
        table = contexts.score_table(contexts.next_logp(hidden), [shared] * len(texts))
        for b, text in enumerate(texts):
            for a, action in enumerate(shared):
                assert float(table[b, a]) == pytest.approx(float(plain(model, text, action).sum()), abs=1e-5)
        more = [torch.randint(1, VOCAB, (n,), generator=g).tolist() for n in (2, 1, 5)]
        hidden = contexts.extend(more)
        texts = [t + m for t, m in zip(texts, more)]
        check(model, contexts, hidden, texts, actions)
        contexts.select([2, 0])  # a context dropped, the others reordered
        texts, actions = [texts[2], texts[0]], [actions[2], actions[0]]
        hidden = contexts.extend([[4], [7, 7]])
        texts = [texts[0] + [4], texts[1] + [7, 7]]
        check(model, contexts, hidden, texts, actions)
        for text, acts in zip(texts, actions):  # the reference the family tests use is the same plain forward
            for action in acts:
                torch.testing.assert_close(full_recompute(model, text, action), plain(model, text, action))
