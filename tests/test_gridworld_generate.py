"""Grid-world actor (batched constrained decoding vs full recompute), history logging, resume, CLI options."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ad.config import make_config
from ad.errors import UserError


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from benchmarks.helpers.tiny_lm import build_tiny  # test-only helper; tasks/ itself never imports models

    return str(build_tiny(tmp_path_factory.mktemp("tiny") / "model", n_layer=1, width=32))


def _cfg(out, model, **kw):
    from tasks.gridworld.config import GenerateConfig

    values = dict(out=str(out), model=model, size=3, num_envs=4, critic_episodes=8, critic_epochs=5,
                  simpo_iterations=2, simpo_states=4, simpo_batch=2, simpo_epochs=1, eval_episodes=4, max_turns=3,
                  max_moves=2, threads=1, progress=False, tensorboard=False, plots=False)
    values.update(kw)
    return make_config(GenerateConfig, values)


def test_actor_batched_matches_reference_and_is_valid(tiny_model):
    from ad.lm.agents import Actor
    from ad.lm.pretrained import load_base
    from benchmarks.helpers.references import actor_sequence_logprob
    from tasks.gridworld.actor import LMActor, shared_prefix_length
    from tasks.gridworld.env import parse_moves
    from tasks.gridworld.prompts import make_prompt

    model, tok = load_base(tiny_model)
    actor = LMActor(model, tok, max_moves=3, generator=torch.Generator().manual_seed(0))
    assert isinstance(actor, Actor)
    prompts = [make_prompt(4, (i % 4, (i // 4) % 4, i % 4, 3, 3)) for i in range(7)]  # different lengths
    out = actor.act(prompts)
    for p, moves, text, lp in zip(prompts, out.actions, out.texts, out.logprobs):
        assert 1 <= len(moves) <= 3 and parse_moves(text) == moves
        assert float(lp.sum()) == pytest.approx(actor_sequence_logprob(actor, p, moves), abs=1e-4)
    ids = [tok(p)["input_ids"] for p in prompts]
    assert len(ids[0]) // 2 < shared_prefix_length(ids) < min(map(len, ids))  # strategy + info run once per batch
    assert shared_prefix_length([[1, 2], [1, 2]]) == 1 and shared_prefix_length([[3], [1, 2]]) == 0
    greedy = actor.act(prompts, greedy=True)
    one_by_one = [actor.act([p], greedy=True).texts[0] for p in prompts]
    assert greedy.texts == one_by_one


def test_generate_logs_every_episode_and_resumes(tiny_model, tmp_path, monkeypatch):
    from ad.history import HistoryReader
    from tasks.gridworld import generate as gen

    out = tmp_path / "gw"
    gen.generate(_cfg(out, tiny_model, phases="critic"))  # critic phase only, then the full command resumes
    assert set(HistoryReader(str(out)).tasks()) == {"eval-before", "critic-b0000", "critic-b0001"}
    real, calls = gen.train_shared_prefix_simpo, []

    def crash_second(*args, **kwargs):  # interrupted inside SimPO iteration 1
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(gen, "train_shared_prefix_simpo", crash_second)
    with pytest.raises(KeyboardInterrupt):
        gen.generate(_cfg(out, tiny_model))
    assert "simpo-i0001" not in HistoryReader(str(out)).tasks()
    monkeypatch.setattr(gen, "train_shared_prefix_simpo", real)
    summary = gen.generate(_cfg(out, tiny_model, plots=True))
    reader = HistoryReader(str(out))
    assert set(reader.tasks()) == {"eval-before", "critic-b0000", "critic-b0001", "simpo-i0000", "simpo-i0001",
                                   "eval-after"}
    table = reader.table().to_pandas()
    assert set(table["phase"]) == {"eval", "critic", "simpo-rollout", "simpo-pair"}
    assert not table.duplicated(["task", "stream", "episode", "step"]).any()
    assert all(len(lp) >= 1 for lp in table["logprob"])
    assert sorted(table.loc[table["task"].str.startswith("simpo"), "update"].unique()) == [0, 1]
    assert table[table["phase"] == "critic"].groupby(["task", "stream"])["episode"].nunique().sum() == 8
    assert summary["eval-after"]["episodes"] == 4 and (out / "_run" / "rates.png").is_file()
    for name in ("critic.pt", "actor-i0000", "actor-i0001"):
        assert (out / "_run" / "checkpoints" / name).exists()
    adam_steps = []  # Adam's step count goes on across iterations, through the resume after the crash
    for k in (0, 1):
        state = torch.load(out / "_run" / "checkpoints" / f"actor-i000{k}" / gen.OPTIMIZER_FILE, weights_only=True)
        adam_steps.append(float(next(iter(state["state"].values()))["step"]))
    assert 0 < adam_steps[0] < adam_steps[1]  # iteration 1 continued the moments of iteration 0
    rows = len(table)
    gen.generate(_cfg(out, tiny_model))  # everything committed: nothing new
    assert len(HistoryReader(str(out)).table(columns=["step"])) == rows
    assert json.loads((out / "_run" / "summary.json").read_text())["critic"]["rows"] > 0


def test_generate_to_a_memory_url_reads_back_and_resumes(tiny_model, tmp_path, monkeypatch):
    """--out memory://...: every phase's rows go through ad.history (the critic reads its episodes back from the
    URL); critic, adapters, summary and plots go to the local run folder runs/generate-<name>, from which the same
    command resumes (memory:// lives in this process, so everything runs in-process)."""
    import uuid

    from ad.history import HistoryReader
    from tasks.gridworld import generate as gen

    monkeypatch.chdir(tmp_path)
    url = f"memory://gridworld-{uuid.uuid4().hex[:8]}/gw"
    gen.generate(_cfg(url, tiny_model, phases="critic", simpo_iterations=1))
    assert set(HistoryReader(url).tasks()) == {"eval-before", "critic-b0000", "critic-b0001"}
    summary = gen.generate(_cfg(url, tiny_model, simpo_iterations=1, plots=True, tensorboard=True))  # resumes
    reader = HistoryReader(url)
    assert set(reader.tasks()) == {"eval-before", "critic-b0000", "critic-b0001", "simpo-i0000", "eval-after"}
    table = reader.table().to_pandas()
    assert set(table["phase"]) == {"eval", "critic", "simpo-rollout", "simpo-pair"}
    assert not table.duplicated(["task", "stream", "episode", "step"]).any()
    run = tmp_path / "runs" / "generate-gw"
    for name in ("checkpoints/critic.pt", "checkpoints/actor-i0000", "rates.png", "summary.json", "tb"):
        assert (run / name).exists(), name
    assert summary["critic"]["rows"] > 0 and summary["eval-after"]["episodes"] == 4
    gen.generate(_cfg(url, tiny_model, simpo_iterations=1))  # everything committed: nothing new
    assert len(HistoryReader(url).table(columns=["step"])) == len(table)
    with pytest.raises(UserError, match="--run-dir"):  # same name, other dataset: the run folder is taken
        gen.generate(_cfg(f"memory://gridworld-{uuid.uuid4().hex[:8]}/gw", tiny_model))


def test_bad_options(tiny_model, tmp_path):
    with pytest.raises(UserError, match="--size"):
        _cfg(tmp_path, tiny_model, size=1)
    with pytest.raises(UserError, match="--phases"):
        _cfg(tmp_path, tiny_model, phases="critic,ppo")
    with pytest.raises(UserError, match="--max-moves"):
        _cfg(tmp_path, tiny_model, max_moves=9)
    with pytest.raises(UserError, match="--simpo-samples"):
        _cfg(tmp_path, tiny_model, simpo_samples=1)
    for name, value in (("simpo_chosen", "oracle"), ("simpo_trainer", "dpo"), ("dtype", "float16")):
        with pytest.raises(UserError, match=f"--{name.replace('_', '-')}"):
            _cfg(tmp_path, tiny_model, **{name: value})


def test_seed_000_configuration_with_the_trl_trainer_runs_end_to_end(tiny_model, tmp_path):
    from ad.history import HistoryReader
    from tasks.gridworld import generate as gen

    out = tmp_path / "gw"  # sampled pairs, absolute state text, pure SimPO through trl's CPOTrainer, bf16 weights
    summary = gen.generate(_cfg(out, tiny_model, simpo_trainer="trl", simpo_chosen="sampled", state_text="absolute",
                                simpo_nll=0.0, progress_bonus=0.0, simpo_iterations=1, dtype="bfloat16"))
    assert "eval-after" in summary and "simpo-i0000" in HistoryReader(str(out)).tasks()


def test_simpo_pairs_prefer_higher_score():
    from tasks.gridworld.prompts import moves_text
    from tasks.gridworld.rollouts import Rewards
    from tasks.gridworld.simpo import sample_pairs
    from ad.lm.agents import ActorOutput

    class Scripted:  # first call half: forward (reaches goal), second half: left (nothing)
        def act(self, prompts, greedy=False):
            n = len(prompts) // 2
            moves = [[0]] * n + [[1]] * n
            return ActorOutput([moves_text(m) for m in moves], moves, [np.zeros(1, np.float32)] * len(moves))

    pairs, ep = sample_pairs(Scripted(), None, Rewards(size=3), [(0, 0, 0, 0, 1), (1, 1, 1, 2, 1)], gamma=0.9)
    assert [p["chosen"] for p in pairs] == [" forward", " forward"] and all(p["rejected"] == " left" for p in pairs)
    assert ep.success_rate() == 0.5


def test_simpo_pairs_take_best_and_worst_of_k_samples():
    from tasks.gridworld.prompts import moves_text
    from tasks.gridworld.rollouts import Rewards
    from tasks.gridworld.simpo import sample_pairs
    from ad.lm.agents import ActorOutput

    # start (0, 0) facing north, goal (0, 1): forward reaches it, left does nothing, left+forward leaves the grid
    scripted = [[1], [0], [1, 0]]

    class Scripted:
        def act(self, prompts, greedy=False):
            n = len(prompts) // 3
            moves = [m for m in scripted for _ in range(n)]  # sample j of every state at rows j*n .. j*n+n-1
            return ActorOutput([moves_text(m) for m in moves], moves, [np.zeros(len(m), np.float32) for m in moves])

    pairs, ep = sample_pairs(Scripted(), None, Rewards(size=3), [(0, 0, 0, 0, 1)], gamma=0.9, samples=3)
    assert pairs == [{"prompt": pairs[0]["prompt"], "chosen": " forward", "rejected": " left, forward"}]
    assert ep.outcomes == [(False, False), (True, False), (False, True)] and ep.rows["stream"] == [0, 1, 2]
    with pytest.raises(ValueError, match="samples"):
        sample_pairs(Scripted(), None, Rewards(size=3), [(0, 0, 0, 0, 1)], gamma=0.9, samples=1)


def test_progress_bonus_prefers_move_lists_that_get_closer():
    from tasks.gridworld.prompts import moves_text
    from tasks.gridworld.rollouts import Rewards
    from tasks.gridworld.simpo import sample_pairs
    from ad.lm.agents import ActorOutput

    class Scripted:  # sample 0: left (stays 3 cells away), sample 1: forward (2 cells away); neither ends the episode
        def act(self, prompts, greedy=False):
            moves = [[1]] * (len(prompts) // 2) + [[0]] * (len(prompts) // 2)
            return ActorOutput([moves_text(m) for m in moves], moves, [np.zeros(1, np.float32)] * len(moves))

    start = [(0, 0, 0, 0, 3)]  # facing north, goal 3 cells north
    assert sample_pairs(Scripted(), None, Rewards(size=4), start, gamma=0.9)[0] == []  # equal rewards: no pair
    pairs, _ = sample_pairs(Scripted(), None, Rewards(size=4), start, gamma=0.9, progress_bonus=0.1)
    assert [(p["chosen"], p["rejected"]) for p in pairs] == [(" forward", " left")]


def test_best_of_all_candidates_chooses_the_best_move_list_the_env_allows():
    from tasks.gridworld.actor import all_move_lists
    from tasks.gridworld.prompts import moves_text
    from tasks.gridworld.rollouts import Rewards
    from tasks.gridworld.simpo import sample_pairs
    from ad.lm.agents import ActorOutput

    class Scripted:  # both samples turn in place
        def act(self, prompts, greedy=False):
            moves = [[1]] * (len(prompts) // 2) + [[1, 1]] * (len(prompts) // 2)
            return ActorOutput([moves_text(m) for m in moves], moves, [np.zeros(len(m), np.float32) for m in moves])

    # (0, 0) facing north, goal (1, 1): the shortest successes are "forward, right, forward" / "right, forward,
    # left, forward" (3 vs 4 moves: the move cost makes the 3-move list the best)
    starts = [(0, 0, 0, 1, 1), (0, 0, 1, 2, 0)]  # second: facing east, goal 2 east -> "forward, forward"
    pairs, ep = sample_pairs(Scripted(), None, Rewards(size=3), starts, gamma=0.9, candidates=all_move_lists(4))
    assert [(p["chosen"], p["rejected"]) for p in pairs] == [(" forward, right, forward", " left, left"),
                                                             (" forward, forward", " left, left")]
    assert ep.success_rate() == 0.0  # the logged episodes stay the policy's own samples


def test_shared_prefix_simpo_matches_full_sequences_and_learns(tiny_model):
    import torch.nn.functional as F
    from peft import LoraConfig, get_peft_model

    from ad.lm.pretrained import load_base
    from tasks.gridworld.prompts import make_prompt
    from tasks.gridworld.actor import completion_ids
    from tasks.gridworld.shared_prefix_simpo import simpo_loss, train_shared_prefix_simpo
    from tasks.gridworld.simpo import make_optimizer

    torch.manual_seed(0)
    base, tok = load_base(tiny_model)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear",
                                            init_lora_weights=False))  # non-zero B: the adapter matters
    pairs = [{"prompt": make_prompt(4, (i % 4, i // 4, i % 4, 3, 3)), "chosen": " forward, left",
              "rejected": " right"} for i in range(5)]
    beta, gamma, nll = 2.0, 0.5, 0.7
    loss, metrics = simpo_loss(model, tok, pairs, beta, gamma, nll)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    model.zero_grad()

    def avg_logp(prompt, completion):  # one full sequence, no shared cache
        p, c = tok(prompt)["input_ids"], completion_ids(tok, completion)
        logp = torch.log_softmax(model(input_ids=torch.tensor([p + c])).logits[0].float(), -1)  # (L, V)
        picked = torch.stack([logp[len(p) - 1 + j, t] for j, t in enumerate(c)])
        return picked.mean(), picked.sum(), len(c)

    chosen = [avg_logp(p["prompt"], p["chosen"]) for p in pairs]
    rejected = [avg_logp(p["prompt"], p["rejected"]) for p in pairs]
    margin = torch.stack([c[0] - r[0] for c, r in zip(chosen, rejected)])
    reference = (-F.logsigmoid(beta * margin - gamma)).mean() - nll * sum(c[1] for c in chosen) / sum(
        c[2] for c in chosen)
    reference.backward()
    assert float(loss.detach()) == pytest.approx(float(reference.detach()), abs=1e-5)
    for n, p in model.named_parameters():
        if p.requires_grad:  # gradients flow through the repeated keys/values of the shared opening too
            assert torch.allclose(grads[n], p.grad, atol=1e-5, rtol=1e-4), n
    model.zero_grad()
    before = metrics["rewards/margins"]
    logs = train_shared_prefix_simpo(model, tok, pairs, make_optimizer(model, 1e-2), beta, gamma, epochs=10,
                                     batch=5, seed=0, nll=nll)
    assert logs["steps"] == 10 and simpo_loss(model, tok, pairs, beta, gamma)[1]["rewards/margins"] > before + 0.3


def test_run_episodes_refills_finished_slots():
    from tasks.gridworld.prompts import moves_text
    from tasks.gridworld.rollouts import Rewards, run_episodes
    from ad.lm.agents import ActorOutput

    calls = []

    class Forward:  # always one step forward (north)
        def act(self, prompts, greedy=False):
            calls.append(len(prompts))
            return ActorOutput([moves_text([0])] * len(prompts), [[0]] * len(prompts),
                               [np.zeros(1, np.float32)] * len(prompts))

    # goal 1, 2, 3 cells north -> episodes of 1, 2, 3 turns; (0, 3) facing north walks off the map at turn 1
    starts = [(0, 0, 0, 0, 3), (1, 0, 0, 1, 1), (0, 3, 0, 1, 1), (2, 0, 0, 2, 2), (3, 2, 0, 3, 3)]
    ep = run_episodes(Forward(), Rewards(size=4), starts, max_turns=6, batch=2, episode_offset=7)
    assert ep.outcomes == [(True, False), (True, False), (False, True), (True, False), (True, False)]
    assert calls[:3] == [2, 2, 2] and sum(calls) == len(ep.rows["step"]) == 3 + 1 + 1 + 2 + 1
    keys = list(zip(ep.rows["stream"], ep.rows["episode"], ep.rows["step"]))
    assert len(set(keys)) == len(keys) and set(ep.rows["stream"]) == {0, 1} and min(ep.rows["episode"]) == 7
    for stream in (0, 1):  # a stream's episodes come one after another
        episodes = [e for s, e, _ in keys if s == stream]
        assert episodes == sorted(episodes)
