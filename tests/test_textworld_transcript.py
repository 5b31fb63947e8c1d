"""Transcript prompts (``--transcript``): the whole game so far, its keys and values cached across moves; scores
equal a full recompute, and SFT reads a game as one row with exactly the scorer's tokens."""
from __future__ import annotations

import pytest
import torch

from tasks.textworld.games import GameOptions
from tasks.textworld.policy import TextWorldPolicy
from benchmarks.helpers.textworld_outcomes import move_accuracy
from tasks.textworld.rollouts import fold_games, gold_demonstrations, play
from tasks.textworld.scoring import encode_commands, full_recompute
from tasks.textworld.sft import sft_rows
from tasks.textworld.transcript import TranscriptScorer, encode_transcript, split_extension

OPTIONS = GameOptions(step_limit=32)


@pytest.fixture(scope="module")
def tiny():
    import tempfile
    from pathlib import Path

    from ad.lm.pretrained import load_base
    from benchmarks.helpers.tiny_lm import build_tiny

    torch.manual_seed(0)
    return load_base(str(build_tiny(Path(tempfile.mkdtemp()) / "tiny", width=32, max_positions=16384)))


@pytest.fixture(scope="module")
def gold():
    """Three gold games of different lengths, transcript prompts (every earlier move shown)."""
    demos = gold_demonstrations(fold_games(OPTIONS, "test", 3, 0), OPTIONS, history=OPTIONS.step_limit)
    assert len({len(d) for d in demos}) > 1
    return demos


def test_transcript_prompts_extend_each_other(gold):
    demo = gold[0]
    assert "Moves so far" not in demo.prompts[-1]
    for k in range(1, len(demo)):
        command, following = split_extension(demo.prompts[k - 1], demo.prompts[k])
        assert command == demo.actions[k - 1] and following.startswith(f"\n# STEP {k}\n")
        assert following.endswith("Action:")
    with pytest.raises(ValueError, match="must extend"):
        split_extension(demo.prompts[1], demo.prompts[0])


def test_encode_transcript_spans_hold_the_commands(tiny, gold):
    _, tokenizer = tiny
    demo = gold[0]
    ids, spans = encode_transcript(tokenizer, demo.prompts, demo.actions)
    assert ids[:spans[0][0]] == tokenizer(demo.prompts[0], add_special_tokens=False)["input_ids"]
    for (start, end), command in zip(spans, encode_commands(tokenizer, demo.actions)):
        assert ids[start:end] == command
    assert spans[-1][1] == len(ids)
    (row,) = sft_rows(tokenizer, [demo], 100_000, transcript=True)
    assert row["input_ids"] == ids
    labelled = [i for i, label in enumerate(row["labels"]) if label != -100]
    assert labelled == [i for start, end in spans for i in range(start, end)]


def test_cached_scores_equal_a_full_recompute_as_games_drop_out(tiny, gold):
    """Lockstep over the gold games (the shortest drops out first): every candidate's token log-probabilities
    equal one plain forward over the transcript's tokens + the candidate."""
    model, tokenizer = tiny
    model.eval()
    scorer = TranscriptScorer(model, tokenizer, 100_000)
    checked = 0
    with torch.no_grad():
        for t in range(max(len(d) for d in gold)):
            active = [i for i, d in enumerate(gold) if len(d) > t]
            scored = scorer.score(active, [gold[i].prompts[t] for i in active],
                                  [gold[i].valid_actions[t] for i in active])
            for b, i in enumerate(active):
                ids, spans = encode_transcript(tokenizer, gold[i].prompts[:t + 1], gold[i].actions[:t + 1])
                assert scored.prompt_ids[b] == ids[:spans[-1][0]]  # the transcript through move t's prompt
                for a in (0, len(gold[i].valid_actions[t]) - 1):  # first and last candidate
                    ref = full_recompute(model, scored.prompt_ids[b], scored.command_ids[b][a])
                    torch.testing.assert_close(scored.token_logprobs[b][a], ref, atol=2e-5, rtol=1e-4)
                    checked += 1
    assert checked > 40


def test_transcript_policy_plays_like_a_full_recompute(tiny):
    """Greedy play with the cache picks, move by move, the command a full recompute scores best."""
    model, tokenizer = tiny
    games = fold_games(OPTIONS, "train", 2, 0)
    policy = TextWorldPolicy(model, tokenizer, max_prompt_tokens=100_000, transcript=True)
    episodes = play(policy, games, GameOptions(step_limit=6), history=6)
    for ep in episodes:
        for prompt_ids, valid, action in zip(ep.prompt_ids, ep.valid_actions, ep.actions):
            with torch.no_grad():
                best = max(valid, key=lambda c: float(full_recompute(model, prompt_ids,
                                                                     encode_commands(tokenizer, [c])[0]).sum()))
            assert best == action
    again = move_accuracy(policy, gold_demonstrations(games, GameOptions(step_limit=6), history=6))
    assert 0.0 <= again["accuracy"] <= 1.0 and again["moves"] > 0


def test_a_transcript_over_the_limit_is_a_user_error(tiny, gold):
    from ad.errors import UserError

    model, tokenizer = tiny
    scorer = TranscriptScorer(model, tokenizer, 64)
    with pytest.raises(UserError, match="--max-prompt-tokens"):
        with torch.no_grad():
            for t in range(len(gold[0])):
                scorer.score([0], [gold[0].prompts[t]], [gold[0].valid_actions[t]])
    with pytest.raises(UserError, match="--max-prompt-tokens"):
        sft_rows(tokenizer, gold[:1], 64, transcript=True)


def test_play_ends_a_game_whose_transcript_fills_the_context(tiny):
    """A game whose next move would not fit --max-prompt-tokens ends there (truncated, counted as "context"),
    the other games play on, and no move is scored over the limit."""
    from tasks.textworld.rollouts import summary

    model, tokenizer = tiny
    games = fold_games(OPTIONS, "train", 3, 0)
    options = GameOptions(step_limit=8)
    free = play(TextWorldPolicy(model, tokenizer, max_prompt_tokens=100_000, transcript=True), games, options, 8)
    need = [max(len(ids) + max(map(len, encode_commands(tokenizer, valid)))
                for ids, valid in zip(ep.prompt_ids, ep.valid_actions)) for ep in free]  # tokens each game needs
    limit = max(need) - 1  # the game that needs the most no longer fits at its last move
    assert min(need) <= limit, need
    policy = TextWorldPolicy(model, tokenizer, max_prompt_tokens=limit, transcript=True)
    cut = play(policy, games, options, 8)
    assert any(ep.context_full for ep in cut) and not all(ep.context_full for ep in cut)
    for ep, whole in zip(cut, free):
        assert ep.actions == whole.actions[:len(ep)]  # the same greedy moves up to the cut
        assert all(len(ids) + max(map(len, encode_commands(tokenizer, valid))) <= limit
                   for ids, valid in zip(ep.prompt_ids, ep.valid_actions))
        if ep.context_full:
            assert ep.truncated[-1] and not ep.terminated[-1] and ep.end() == "context" and len(ep) < len(whole)
    counts = summary(cut)
    assert counts["ended_context"] == sum(ep.context_full for ep in cut)
    assert sum(counts[f"ended_{e}"] for e in ("success", "failed", "limit", "context")) == len(cut)


def test_transcript_option_needs_a_whole_game_of_tokens():
    from ad.config import make_config
    from ad.errors import UserError
    from tasks.textworld.config import GenerateConfig

    with pytest.raises(UserError, match="at least 256 x --step-limit"):
        make_config(GenerateConfig, {"transcript": True, "step_limit": 32})
    cfg = make_config(GenerateConfig, {"transcript": True, "step_limit": 32, "max_prompt_tokens": 8192})
    assert cfg.prompt_window() == (32, [])
    assert make_config(GenerateConfig, {}).prompt_window() == (1, ["read cookbook"])


def test_game_logprobs_equal_the_per_move_forward_and_ppo_trains_on_whole_games(tiny):
    """PPO on transcripts reads each game in one pass: the same token log-probabilities, masks and value states as
    one forward per move; an update by whole games changes the adapter and the value head."""
    from peft import get_peft_model

    from ad.config.groups import peft_lora_config
    from tasks.textworld.command_tokens import game_logprobs, move_logprobs
    from tasks.textworld.ppo import PPOLearner
    from tasks.textworld.ppo_moves import collect_moves, transcript_games

    model, tokenizer = tiny
    options = GameOptions(step_limit=5)
    peft = get_peft_model(model, peft_lora_config({"lora_r": 2, "lora_alpha": 4.0, "lora_dropout": 0.0,
                                                   "target_modules": ["all-linear"]}))
    head = torch.nn.Linear(model.config.hidden_size, 1)
    policy = TextWorldPolicy(peft, tokenizer, head, max_prompt_tokens=100_000, transcript=True)
    episodes = play(policy, fold_games(options, "train", 2, 1), options, history=5, greedy=False,
                    generator=torch.Generator().manual_seed(0))
    games = transcript_games(episodes)
    with torch.no_grad():
        whole = game_logprobs(peft, [g[0] for g in games], [g[1] for g in games], tokenizer.pad_token_id)
        per_move = move_logprobs(peft, [p for e in episodes for p in e.prompt_ids],
                                 [c for e in episodes for c in e.command_ids], tokenizer.pad_token_id)
    for a, b in zip(whole, per_move):
        torch.testing.assert_close(a.float(), b.float(), atol=2e-5, rtol=1e-4)
    acted = torch.tensor([x for e in episodes for lp in e.logprobs for x in lp])  # what acting logged
    torch.testing.assert_close(whole[0][whole[1]].cpu(), acted, atol=2e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="not a transcript"):
        transcript_games([type(episodes[0])(**{**episodes[0].__dict__, "prompt_ids": [[1]] * len(episodes[0])})])

    moves = collect_moves(episodes, peft, gamma=0.99, lam=0.95, pad_id=tokenizer.pad_token_id, transcript=True)
    assert moves.games is not None and len(moves.games) == 2
    lora = {n: p.detach().clone() for n, p in peft.named_parameters() if "lora_" in n}
    learner = PPOLearner(peft, head, lr=1e-2, clip=0.2, value_clip=0.2, vf_coef=0.5, kl_coef=0.05, epochs=1,
                         batch_size=4, pad_id=tokenizer.pad_token_id, seed=0)
    stats = learner.update(moves)
    assert all(map(lambda v: v == v, stats.values()))  # finite statistics
    assert any(not torch.equal(p, lora[n]) for n, p in peft.named_parameters() if "lora_" in n)
    peft.unload()  # give the module fixture its plain model back
