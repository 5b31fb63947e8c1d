"""TextWorld policy and PPO pieces against slow references: batched cached scoring vs a full recompute per
command, GAE vs a plain loop, the PPO loss vs a per-sample formula; one update trains LoRA + value head only."""
from __future__ import annotations

import copy
import math

import pytest
import torch

from tasks.textworld.games import GameOptions
from tasks.textworld.policy import TextWorldPolicy
from tasks.textworld.command_tokens import move_logprobs, token_terms
from tasks.textworld.ppo import PPOLearner, ppo_loss
from tasks.textworld.ppo_moves import collect_moves, gae
from tasks.textworld.rollouts import fold_games, play
from tasks.textworld.scoring import full_recompute, score_candidates

PROMPTS = ["# TASK: cook\nObs: You are in the kitchen.\nAction:", "# TASK: eat\nObs: A fridge.\nAction:"]
CANDIDATES = [["take knife", "open fridge", "look around"], ["eat meal", "move west"]]


@pytest.fixture(scope="module")
def tiny():
    from benchmarks.helpers.tiny_lm import build_tiny
    from ad.lm.pretrained import load_base

    torch.manual_seed(0)
    import tempfile

    model, tokenizer = load_base(str(build_tiny(tempfile.mkdtemp(), width=32, max_positions=2048)))
    return model.eval(), tokenizer


def test_batched_cached_scores_match_a_full_recompute_of_each_command(tiny):
    model, tokenizer = tiny
    with torch.no_grad():
        scored = score_candidates(model, tokenizer, PROMPTS, CANDIDATES, max_prompt_tokens=30)
        for b, cands in enumerate(CANDIDATES):
            assert len(scored.prompt_ids[b]) == min(30, len(PROMPTS[b]))  # char tokenizer: left-truncated
            for a in range(len(cands)):
                ref = full_recompute(model, scored.prompt_ids[b], scored.command_ids[b][a])
                torch.testing.assert_close(scored.token_logprobs[b][a], ref, atol=1e-5, rtol=1e-5)
                assert scored.scores[b][a] == pytest.approx(float(ref.sum()), abs=1e-4)


def test_candidate_trie_feeds_shared_prefixes_once_and_scores_like_a_full_recompute(tiny):
    """Commands sharing a prefix feed it once, no command's last token is fed, and a game whose commands are all
    one token long feeds nothing; every score still equals a full recompute."""
    from tasks.textworld.scoring import candidate_trie

    model, tokenizer = tiny
    cands = [["examine cookbook", "examine counter", "examine", "open fridge"], ["n", "s", "e"]]
    ids = [[[1, 2, 3], [1, 2, 4], [1], [5, 6]], [[7], [8], [9]]]
    trie = candidate_trie(ids, pad=0)
    assert trie.ids.shape == (2, 3)  # (1,), (1, 2) shared; (5,): three nodes in game 0, none in game 1
    assert trie.nodes[0] == [[0, 1], [0, 1], [], [2]] and trie.nodes[1] == [[], [], []]
    assert trie.ancestors[0, 1, 0] and trie.ancestors[0, 1, 1] and not trie.ancestors[0, 2, 0]
    with torch.no_grad():
        for games in (cands, [cands[1], ["a", "b"]]):  # the second batch feeds no node at all
            prompts = PROMPTS[:len(games)]
            scored = score_candidates(model, tokenizer, prompts, games, max_prompt_tokens=60)
            for b, game in enumerate(games):
                for a in range(len(game)):
                    ref = full_recompute(model, scored.prompt_ids[b], scored.command_ids[b][a])
                    torch.testing.assert_close(scored.token_logprobs[b][a], ref, atol=1e-5, rtol=1e-5)


def test_one_token_commands_feed_no_node(tiny):
    from transformers import DynamicCache

    from tasks.textworld.scoring import score_candidates_after

    model, tokenizer = tiny
    prompt = tokenizer(PROMPTS[0], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        cache = DynamicCache()
        hidden = model.get_decoder()(input_ids=torch.tensor([prompt]), cache=cache, use_cache=True).last_hidden_state
        first = torch.log_softmax(model.get_output_embeddings()(hidden[:, -1]).float(), -1)  # (1, V)
        scores, per, fed = score_candidates_after(model.get_decoder(), model.get_output_embeddings(), cache,
                                                  torch.ones(1, len(prompt), dtype=torch.bool),
                                                  torch.tensor([len(prompt)]), first, [[[7], [8]]], pad=0)
        assert fed == 0 and cache.get_seq_length() == len(prompt)
        for command, got in zip(([7], [8]), per[0]):
            torch.testing.assert_close(got, full_recompute(model, prompt, command), atol=1e-5, rtol=1e-5)
        assert scores[0].shape == (2,)


def test_acting_logprobs_match_the_training_forward(tiny):
    model, tokenizer = tiny
    policy = TextWorldPolicy(model, tokenizer, torch.nn.Linear(32, 1), max_prompt_tokens=40, batch=2)
    choices = policy.act(PROMPTS, CANDIDATES, greedy=False, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logp, mask, hidden = move_logprobs(model, [c.prompt_ids for c in choices], [c.command_ids for c in choices],
                                           tokenizer.pad_token_id)
        values = policy.value_head(hidden).squeeze(-1)
    for b, c in enumerate(choices):
        assert c.action in CANDIDATES[b]
        n = len(c.command_ids)
        torch.testing.assert_close(logp[b, :n], torch.tensor(c.token_logprobs), atol=1e-5, rtol=1e-5)
        assert not bool(mask[b, n:].any())
        assert c.value == pytest.approx(float(values[b]), abs=1e-5)


def test_bfloat16_weights_score_like_a_bfloat16_full_recompute(tiny):
    """--dtype bfloat16: the packed, cached pass builds its mask in the weights' dtype and agrees with a plain
    bfloat16 forward to bfloat16 rounding; the greedy choice equals the float32 model's on these prompts."""
    model, tokenizer = tiny
    half = copy.deepcopy(model).to(torch.bfloat16)
    with torch.no_grad():
        scored = score_candidates(half, tokenizer, PROMPTS, CANDIDATES, max_prompt_tokens=30)
        exact = score_candidates(model, tokenizer, PROMPTS, CANDIDATES, max_prompt_tokens=30)
        for b, cands in enumerate(CANDIDATES):
            for a in range(len(cands)):
                ref = full_recompute(half, scored.prompt_ids[b], scored.command_ids[b][a])
                assert scored.token_logprobs[b][a].dtype == torch.float32  # log-softmax runs in float32
                torch.testing.assert_close(scored.token_logprobs[b][a], ref, atol=0.05, rtol=0.02)
            torch.testing.assert_close(scored.scores[b], exact.scores[b], atol=0.3, rtol=0.02)
            assert int(scored.scores[b].argmax()) == int(exact.scores[b].argmax())


def _gae_loop(rewards, values, gamma, lam):
    adv, last = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        next_value = values[t + 1] if t + 1 < len(rewards) else 0.0
        last = rewards[t] + gamma * next_value - values[t] + gamma * lam * last
        adv[t] = last
    return adv


def test_gae_matches_a_plain_loop_per_episode():
    g = torch.Generator().manual_seed(0)
    lengths = [5, 1, 3]
    rewards, values = torch.rand(3, 5, generator=g, dtype=torch.float64), torch.rand(3, 5, generator=g,
                                                                                   dtype=torch.float64)
    mask = torch.zeros(3, 5, dtype=torch.float64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    adv, ret = gae(rewards * mask, values * mask, mask, 0.9, 0.8)
    for i, n in enumerate(lengths):
        ref = _gae_loop(rewards[i, :n].tolist(), values[i, :n].tolist(), 0.9, 0.8)
        torch.testing.assert_close(adv[i, :n], torch.tensor(ref, dtype=torch.float64))
        torch.testing.assert_close(ret[i, :n], torch.tensor(ref, dtype=torch.float64) + values[i, :n])
        assert float(adv[i, n:].abs().sum()) == 0.0


def test_ppo_loss_matches_a_per_sample_formula():
    g = torch.Generator().manual_seed(0)
    B, K = 6, 4
    new, old, ref = (torch.randn(B, K, generator=g) * 0.3 - 2 for _ in range(3))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    adv, nv, ov, ret = (torch.randn(B, generator=g) for _ in range(4))
    clip, vclip, vf, klc = 0.2, 0.3, 0.5, 0.1
    log_ratio, terms = token_terms(new, old, ref, mask)
    loss, stats = ppo_loss(log_ratio, terms, adv, nv, ov, ret, clip, vclip, vf, klc)
    pol, val, kl = [], [], []
    for b in range(B):
        n = int(mask[b].sum())
        r = math.exp(float(new[b, :n].sum() - old[b, :n].sum()))
        a = float(adv[b])
        pol.append(max(-a * r, -a * min(max(r, 1 - clip), 1 + clip)))
        v, o, R = float(nv[b]), float(ov[b]), float(ret[b])
        val.append(max((v - R) ** 2, (o + min(max(v - o, -vclip), vclip) - R) ** 2))
        kl.append(sum(math.exp(float(ref[b, t] - new[b, t])) - float(ref[b, t] - new[b, t]) - 1 for t in range(n)))
    expected = sum(pol) / B + vf * 0.5 * sum(val) / B + klc * sum(kl) / B
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert stats["kl"] == pytest.approx(sum(kl) / B, rel=1e-5)


def test_one_ppo_update_trains_lora_and_value_head_only(tiny):
    from peft import get_peft_model

    from ad.config.groups import peft_lora_config

    base, tokenizer = tiny
    import copy

    model = get_peft_model(copy.deepcopy(base), peft_lora_config(
        {"lora_r": 4, "lora_alpha": 8.0, "lora_dropout": 0.0, "target_modules": ["all-linear"]}))
    head = torch.nn.Linear(32, 1)
    policy = TextWorldPolicy(model, tokenizer, head, max_prompt_tokens=120)
    options = GameOptions(step_limit=3)
    episodes = play(policy, fold_games(options, "train", 2, 0), options, history=1, greedy=False,
                    generator=torch.Generator().manual_seed(0))
    assert [len(e) for e in episodes] == [3, 3] and all(len(lp) > 0 for e in episodes for lp in e.logprobs)
    moves = collect_moves(episodes, model, gamma=0.99, lam=0.95, pad_id=tokenizer.pad_token_id)
    torch.testing.assert_close(moves.ref_logp, moves.old_logp, atol=1e-5, rtol=1e-5)  # fresh adapter = reference
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    lora = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    head_before = head.weight.detach().clone()
    learner = PPOLearner(model, head, lr=1e-2, clip=0.2, value_clip=0.2, vf_coef=0.5, kl_coef=0.1, epochs=1,
                         batch_size=4, pad_id=tokenizer.pad_token_id, seed=0)
    stats = learner.update(moves)
    assert all(math.isfinite(v) for v in stats.values())
    params = dict(model.named_parameters())
    assert all(torch.equal(params[n], p) for n, p in frozen.items())
    assert any(not torch.equal(params[n], p) for n, p in lora.items())
    assert not torch.equal(head.weight, head_before)


def test_target_kl_stops_the_update_once_the_policy_moved(tiny):
    """With a tiny --ppo-target-kl the first minibatch passes (approx_kl ~ 0: nothing moved yet) and the update stops
    at the next one without taking its step; with 0 every epoch runs."""
    import copy

    from peft import get_peft_model

    from ad.config.groups import peft_lora_config

    base, tokenizer = tiny
    options = GameOptions(step_limit=3)
    results = {}
    for target in (0.0, 1e-9):
        model = get_peft_model(copy.deepcopy(base), peft_lora_config(
            {"lora_r": 4, "lora_alpha": 8.0, "lora_dropout": 0.0, "target_modules": ["all-linear"]}))
        torch.manual_seed(0)
        head = torch.nn.Linear(32, 1)
        policy = TextWorldPolicy(model, tokenizer, head, max_prompt_tokens=120)
        episodes = play(policy, fold_games(options, "train", 2, 0), options, history=1, greedy=False,
                        generator=torch.Generator().manual_seed(0))
        moves = collect_moves(episodes, model, gamma=0.99, lam=0.95, pad_id=tokenizer.pad_token_id)
        learner = PPOLearner(model, head, lr=1e-2, clip=0.2, value_clip=0.2, vf_coef=0.5, kl_coef=0.1, epochs=2,
                             batch_size=2, pad_id=tokenizer.pad_token_id, seed=0, target_kl=target)
        results[target] = learner.update(moves)
    assert results[0.0]["steps"] == 2 * 3 and results[0.0]["stopped_early"] == 0.0  # 6 moves, batches of 2, 2 epochs
    assert results[1e-9]["steps"] == 1 and results[1e-9]["stopped_early"] == 1.0
    assert results[1e-9]["approx_kl"] > 0


def test_merged_ppo_adapter_acts_like_the_unmerged_one(tiny):
    """The final PPO evaluation merges the adapter (training.merge_for_evaluation): same greedy commands, same
    per-token log-probabilities and values as the unmerged adapter, and the adapter really changed the policy."""
    from peft import get_peft_model

    from ad.config.groups import peft_lora_config
    from tasks.textworld.training import merge_for_evaluation

    base, tokenizer = tiny
    model = get_peft_model(copy.deepcopy(base), peft_lora_config(
        {"lora_r": 4, "lora_alpha": 8.0, "lora_dropout": 0.0, "target_modules": ["all-linear"]}))
    torch.manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # a trained-looking adapter (fresh LoRA B is zero)
    head = torch.nn.Linear(32, 1)
    before = TextWorldPolicy(model, tokenizer, head, max_prompt_tokens=40).act(PROMPTS, CANDIDATES)
    plain = TextWorldPolicy(base, tokenizer, head, max_prompt_tokens=40).act(PROMPTS, CANDIDATES)
    after = TextWorldPolicy(merge_for_evaluation(model), tokenizer, head, max_prompt_tokens=40).act(PROMPTS, CANDIDATES)
    assert any(abs(a.value - p.value) > 1e-3 for a, p in zip(before, plain))  # the adapter matters here
    layers = [m for m in model.modules() if hasattr(m, "merged") and hasattr(m, "lora_A")]
    assert layers and all(m.merged for m in layers)  # folded into the weights, not applied beside them
    for b, a in zip(before, after):
        assert a.action == b.action
        torch.testing.assert_close(torch.tensor(a.token_logprobs), torch.tensor(b.token_logprobs), atol=1e-4,
                                   rtol=1e-4)
        assert a.value == pytest.approx(b.value, abs=1e-4)
