"""PPO on the distribution the policy acts by (``--ppo-ratio valid-commands``) against slow references: every
valid command rescored in one differentiable pass per row vs a full recompute per command, the policy terms vs a
per-move formula, what acting logged vs what the update recomputes, and a rewarded command gaining probability."""
from __future__ import annotations

import copy
import math

import pytest
import torch

from tasks.textworld.command_scores import Branch, branch_scores, policy_terms
from tasks.textworld.games import GameOptions
from tasks.textworld.policy import TextWorldPolicy
from tasks.textworld.ppo import PPOLearner
from tasks.textworld.ppo_moves import collect_moves, game_starts
from tasks.textworld.rollouts import Episode, fold_games, play
from tasks.textworld.scoring import encode_commands, full_recompute

LORA = {"lora_r": 4, "lora_alpha": 8.0, "lora_dropout": 0.0, "target_modules": ["all-linear"]}


@pytest.fixture(scope="module")
def tiny():
    import tempfile

    from ad.lm.pretrained import load_base
    from benchmarks.helpers.tiny_lm import build_tiny

    model, tokenizer = load_base(str(build_tiny(tempfile.mkdtemp(), width=32, max_positions=2048)))
    return model.eval(), tokenizer


def _peft(base):
    from peft import get_peft_model

    from ad.config.groups import peft_lora_config

    return get_peft_model(copy.deepcopy(base), peft_lora_config(LORA))


def test_branch_scores_equal_a_full_recompute_per_command_and_carry_gradients(tiny):
    """Rows of different lengths, one with three branches (a transcript game), one with one (a windowed move),
    commands sharing prefixes and one-token commands: each score is the full recompute's sum, each hidden state
    the plain forward's at the prompt's end, and the scores are differentiable in the weights."""
    model, tokenizer = tiny
    enc = lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    rows = [enc("# TASK: cook\nObs: kitchen.\nAction: open fridge\nObs: a carrot.\nAction: take carrot\nObs: ok"),
            enc("# TASK: eat\nObs: A fridge.\nAction:")]
    commands = [encode_commands(tokenizer, c) for c in (["open fridge", "open door", "look"], ["take carrot", "x"],
                                                        ["eat meal", "eat carrot", "move west", "inventory"],
                                                        ["eat meal", "open fridge"])]
    cut = len(enc("# TASK: cook\nObs: kitchen.\nAction:"))
    branches = [Branch(0, cut, commands[0]), Branch(0, cut + 5, commands[1]), Branch(1, len(rows[1]), commands[3]),
                Branch(0, len(rows[0]), commands[2])]
    out = branch_scores(model, rows, branches, tokenizer.pad_token_id)
    assert out.scores.shape == (4, 4) and out.mask.sum(1).tolist() == [3, 2, 2, 4]
    with torch.no_grad():
        for k, b in enumerate(branches):
            prompt = rows[b.row][:b.at]
            for a, c in enumerate(b.commands):
                assert float(out.scores[k, a]) == pytest.approx(float(full_recompute(model, prompt, c).sum()),
                                                                abs=1e-4)
            plain = model.get_decoder()(input_ids=torch.tensor([prompt])).last_hidden_state[0, -1]
            torch.testing.assert_close(out.hidden[k], plain, atol=1e-5, rtol=1e-4)
    assert out.scores[~out.mask].max() < -1e8
    out.scores[out.mask].sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters() if p.requires_grad)
    model.zero_grad(set_to_none=True)


def test_policy_terms_match_a_per_move_formula():
    g = torch.Generator().manual_seed(0)
    counts, T = [3, 1, 4, 2], 0.7
    A = max(counts)
    mask = torch.tensor([[a < n for a in range(A)] for n in counts])
    new, old, ref = (torch.randn(len(counts), A, generator=g) * 2 - 3 for _ in range(3))
    chosen = torch.tensor([2, 0, 1, 1])
    log_ratio, terms = policy_terms(new, mask, chosen, old, ref, T)
    for b, n in enumerate(counts):
        def pi(s):
            z = [math.exp(float(x) / T) for x in s[b, :n]]
            return [v / sum(z) for v in z]
        p_new, p_old, p_ref = pi(new), pi(old), pi(ref)
        c = int(chosen[b])
        assert float(log_ratio[b]) == pytest.approx(math.log(p_new[c] / p_old[c]), rel=1e-5, abs=1e-6)
        assert float(terms["kl"][b]) == pytest.approx(sum(p * math.log(p / q) for p, q in zip(p_new, p_ref)),
                                                      rel=1e-4, abs=1e-6)
        assert float(terms["approx_kl"][b]) == pytest.approx(sum(p * math.log(p / q) for p, q in zip(p_old, p_new)),
                                                             rel=1e-4, abs=1e-6)
        assert float(terms["entropy"][b]) == pytest.approx(-sum(p * math.log(p) for p in p_new), rel=1e-5)


@pytest.mark.parametrize("transcript", [False, True])
def test_acting_scores_are_what_the_update_rescores(tiny, transcript):
    """The valid commands' scores logged while playing equal the reference's (a fresh adapter changes nothing)
    and the first minibatch's rescoring (ratio 1, approx_kl 0); then an update trains the adapter."""
    base, tokenizer = tiny
    model = _peft(base)
    head = torch.nn.Linear(32, 1)
    options = GameOptions(step_limit=4)
    policy = TextWorldPolicy(model, tokenizer, head, max_prompt_tokens=100_000 if transcript else 150,
                             transcript=transcript)
    episodes = play(policy, fold_games(options, "train", 2, 0), options, history=4 if transcript else 1,
                    greedy=False, temperature=1.3, generator=torch.Generator().manual_seed(0))
    for e in episodes:
        assert [len(s) for s in e.candidate_scores] == [len(v) for v in e.valid_actions]
        assert [e.valid_actions[t][i] for t, i in enumerate(e.indices)] == e.actions
    moves = collect_moves(episodes, model, gamma=0.99, lam=0.95, pad_id=tokenizer.pad_token_id, batch=3,
                          transcript=transcript)
    torch.testing.assert_close(moves.ref_scores, moves.old_scores, atol=1e-4, rtol=1e-5)
    learner = PPOLearner(model, head, lr=1e-2, clip=0.2, value_clip=0.2, vf_coef=0.5, kl_coef=0.1, epochs=1,
                         batch_size=3, pad_id=tokenizer.pad_token_id, seed=0, temperature=1.3)
    first = game_starts(moves)
    idx, games = next(learner._minibatches(moves, first))[0]
    with torch.no_grad():
        log_ratio, terms, _ = learner._terms(moves, idx, games, first)
    assert float(log_ratio.abs().max()) < 1e-4 and float(terms["approx_kl"].max()) < 1e-6
    lora = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    stats = learner.update(moves)
    assert stats["steps"] >= 1 and all(math.isfinite(v) for v in stats.values())
    assert any(not torch.equal(p, lora[n]) for n, p in model.named_parameters() if p.requires_grad)


def test_ppo_raises_the_probability_of_the_rewarded_command(tiny):
    """A one-move game (reward 1 for "take onion", the least likely of four at the start, 0 otherwise), 8 sampled
    plays per iteration, 6 iterations: the acting probability of the rewarded command rises well above its start
    and it becomes the greedy choice; the KL to the reference grows."""
    base, tokenizer = tiny
    model = _peft(base)
    head = torch.nn.Linear(32, 1)
    prompt = "# TASK: cook\nObs: You are in the kitchen.\nAction:"
    valid = ["take onion", "take knife", "take apple", "take bread"]
    policy = TextWorldPolicy(model, tokenizer, head, max_prompt_tokens=100)
    learner = PPOLearner(model, head, lr=3e-2, clip=0.2, value_clip=0.0, vf_coef=0.5, kl_coef=0.01, epochs=2,
                         batch_size=4, pad_id=tokenizer.pad_token_id, seed=0)
    generator = torch.Generator().manual_seed(0)

    def p_target():
        scores = policy.act([prompt], [valid])[0].scores
        return float(torch.softmax(torch.tensor(scores), -1)[0])

    start = p_target()
    assert start < 0.25  # the least likely of the four
    for _ in range(6):
        episodes = []
        for choice in policy.act([prompt] * 8, [valid] * 8, greedy=False, generator=generator):
            e = Episode("train", 0, "one-move")
            e.prompts, e.actions, e.rewards = [prompt], [choice.action], [float(choice.action == "take onion")]
            e.terminated, e.truncated, e.logprobs, e.values = [True], [False], [choice.token_logprobs], [choice.value]
            e.prompt_ids, e.command_ids, e.valid_actions = [choice.prompt_ids], [choice.command_ids], [valid]
            e.indices, e.candidate_scores, e.candidate_ids = [choice.index], [choice.scores], [choice.candidate_ids]
            episodes.append(e)
        stats = learner.update(collect_moves(episodes, model, 0.99, 0.95, tokenizer.pad_token_id))
    assert p_target() > start + 0.3 and policy.act([prompt], [valid])[0].action == "take onion"
    assert stats["kl"] > 0


@pytest.mark.parametrize("transcript", [False, True])
def test_micro_batches_give_the_whole_minibatch_gradient(tiny, transcript):
    """--ppo-micro-batch-size 1 (one move, or one game, per forward / backward pass) takes the same optimiser steps
    as whole minibatches: the same adapter, value head and statistics after an update."""
    base, tokenizer = tiny
    options = GameOptions(step_limit=4)
    model = _peft(base)
    torch.manual_seed(0)
    head = torch.nn.Linear(32, 1)
    policy = TextWorldPolicy(model, tokenizer, head, max_prompt_tokens=100_000 if transcript else 150,
                             transcript=transcript)
    episodes = play(policy, fold_games(options, "train", 3, 0), options, history=4 if transcript else 1,
                    greedy=False, generator=torch.Generator().manual_seed(0))
    moves = collect_moves(episodes, model, gamma=0.99, lam=0.95, pad_id=tokenizer.pad_token_id,
                          transcript=transcript)
    after = []
    for micro in (0, 1):
        m, h = copy.deepcopy(model), copy.deepcopy(head)
        learner = PPOLearner(m, h, lr=1e-2, clip=0.2, value_clip=0.2, vf_coef=0.5, kl_coef=0.1, epochs=2,
                             batch_size=6, pad_id=tokenizer.pad_token_id, seed=0, micro_batch_size=micro)
        stats = learner.update(moves)
        after.append(({n: p.detach() for n, p in m.named_parameters() if p.requires_grad}, h.weight.detach(), stats))
    (lora0, head0, stats0), (lora1, head1, stats1) = after
    assert stats0["steps"] == stats1["steps"] >= 2
    assert any(not torch.equal(p, dict(model.named_parameters())[n]) for n, p in lora0.items())
    for n, p in lora0.items():
        torch.testing.assert_close(lora1[n], p, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(head1, head0, atol=1e-5, rtol=1e-4)
    for k, v in stats0.items():
        assert stats1[k] == pytest.approx(v, rel=1e-4, abs=1e-6), k
