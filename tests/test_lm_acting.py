"""Acting with an LM trained from scratch: the batched, KV-cached LMPolicy (one token batch per env step over every
held-out goal x seed) takes exactly the greedy actions of the one-env-at-a-time full-recompute reference, window
shifts included; a saved scratch model loads for `ad eval`."""
import numpy as np
import pytest
import torch

from ad.evaluate import run_in_context
from ad.formats.language import get_template
from models.lm.policy import LMPolicy
from benchmarks.helpers.references import FullRecomputePolicy
from models.lm.scratch import build_scratch
from models.lm.vocab import template_tokenizer
from ad.registry import env_factory

torch.set_num_threads(1)

TASKS = ["darkroom5-g0-0", "darkroom5-g4-4", "darkroom5-g1-3"]
METADATA = {"task_spec": {"size": 5, "episode_length": 8, "terminate_on_goal": False}}


@pytest.fixture(scope="module")
def scratch():
    tokenizer = template_tokenizer(get_template("words"), 25, 5, [0.0, 1.0])
    model = build_scratch(tokenizer, n_layer=2, n_embd=32, n_head=2, n_ff=64, max_positions=128, seed=3).eval()
    with torch.no_grad():  # larger weights than the init's: decisive, state-dependent preferences
        for p in model.parameters():
            p.mul_(8.0 if p.dim() > 1 else 1.0)
    return model, tokenizer


class Recorder:
    """Wraps a policy and keeps every action it takes."""

    def __init__(self, policy):
        self.policy, self.actions = policy, []

    def reset(self, num_envs):
        self.policy.reset(num_envs)

    def act(self, *args):
        actions = torch.as_tensor(self.policy.act(*args))
        self.actions.append(actions.clone())
        return actions


def test_cached_batched_greedy_actions_equal_full_recompute(scratch):
    model, tokenizer = scratch
    window = dict(tokenizer=tokenizer, template="words", actions=range(5), greedy=True, context=10, max_tokens=40)
    ours, reference = Recorder(LMPolicy(model, **window)), Recorder(FullRecomputePolicy(model, **window))
    results = [run_in_context(p, env_factory("darkroom")(METADATA, TASKS, 2), episodes=5, seed=1, progress=False)
               for p in (ours, reference)]
    taken, expected = torch.stack(ours.actions), torch.stack(reference.actions)  # (steps, envs)
    assert taken.shape == (40, 6)
    assert torch.equal(taken, expected)
    assert len(set(taken.flatten().tolist())) > 1  # the check is not vacuous: the policy does not always pick one
    np.testing.assert_array_equal(results[0].returns, results[1].returns)


def test_one_token_batch_per_step_after_the_first(scratch, monkeypatch):
    model, tokenizer = scratch
    policy = LMPolicy(model, tokenizer, "words", range(5), greedy=True, context=40, max_tokens=200)
    widths = []
    forward = policy._forward

    def spy(ids, mask):
        widths.append(ids.shape)
        return forward(ids, mask)

    monkeypatch.setattr(policy, "_forward", spy)
    run_in_context(policy, env_factory("darkroom")(METADATA, TASKS, 2), episodes=3, seed=0, progress=False)
    assert len(widths) == 24  # one batched forward per env step, all 6 envs in it
    assert all(shape[0] == 6 for shape in widths)
    # after the first prompt each step feeds action + reward (+ episode boundary) + new state: 3-4 tokens
    assert all(shape[1] in (3, 4) for shape in widths[1:])


def test_saved_scratch_model_loads_as_an_eval_policy(scratch, tmp_path):
    from models.lm.loader import load
    from models.lm.train import save_model

    model, tokenizer = scratch
    info = {"base_model": "scratch", "dtype": "float32", "template": "words", "context": 10, "max_tokens": 40,
            "actions": list(range(5)), "num_states": 25, "family": "darkroom", "steps": 0}
    save_model(model, tokenizer, tmp_path, info)
    assert (tmp_path / "model" / "weights" / "config.json").is_file()
    policy = load(tmp_path, greedy=True)
    direct = LMPolicy(model, tokenizer, "words", range(5), greedy=True, context=10, max_tokens=40)
    got = [run_in_context(p, env_factory("darkroom")(METADATA, TASKS, 1), episodes=3, seed=2, progress=False).returns
           for p in (policy, direct)]
    np.testing.assert_array_equal(got[0], got[1])
