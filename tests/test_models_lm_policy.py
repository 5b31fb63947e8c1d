"""LMPolicy: cached batched action scoring equals full-forward log-likelihoods, contexts round-trip, it never
acts invalidly and plugs into the in-context evaluator; GeneratePolicy counts invalid outputs."""
import numpy as np
import pytest
import torch

from ad.config import make_config
from ad.errors import UserError
from ad.formats.language import get_template
from ad.lm.pretrained import load_base
from benchmarks.helpers.references import sequence_logprob
from models.lm.policy import GeneratePolicy, LMPolicy
from benchmarks.helpers.tiny_lm import build_tiny

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model, tokenizer = load_base(str(build_tiny(tmp_path_factory.mktemp("tiny") / "m", n_layer=2, width=32)))
    return model.double(), tokenizer  # float64: no near-tie can flip a comparison


@pytest.fixture(scope="module")
def darkroom3(tmp_path_factory):
    from tasks.darkroom.config import GenerateConfig
    from tasks.darkroom.generate import generate

    out = tmp_path_factory.mktemp("dr") / "d"
    return generate(make_config(GenerateConfig, {"out": str(out), "size": 3, "steps_per_goal": 400, "hidden": 16,
                                                 "progress": False, "tensorboard": False, "plots": False,
                                                 "terminate_on_goal": False}))


def rollout(policy, steps=40, B=3, seed=0, check=None):
    """Act in a toy lockstep env whose next state depends on the action; ``check(step)`` after each step."""
    policy.reset(B)
    g = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 81, (B,), generator=g)
    prev_a, prev_r, t = torch.zeros(B, dtype=torch.long), torch.zeros(B), torch.zeros(B, dtype=torch.long)
    taken = []
    for step in range(steps):
        a = policy.act(obs, prev_a, prev_r, t, torch.full((B,), step == 0))
        taken.append(torch.as_tensor(a))
        if check is not None:
            check(step)
        prev_a, prev_r = torch.as_tensor(a), (torch.as_tensor(a) % 3 == 0).float()
        t = (t + 1) % 7
        obs = torch.where(t == 0, torch.full_like(obs, 40), (obs * 3 + torch.as_tensor(a) + 1) % 81)
    return torch.stack(taken)


@pytest.mark.parametrize("actions", [list(range(5)), [0, 12, 345, 7]])  # single- and multi-token actions
def test_cached_scores_equal_full_forward_loglikelihoods(tiny, actions):
    model, tokenizer = tiny
    policy = LMPolicy(model, tokenizer, "compact", actions, context=6, max_tokens=50, greedy=False,
                      generator=torch.Generator().manual_seed(0))
    errors, budgets = [], []

    def check(step):
        scores = policy.last_scores
        for b in range(policy.num_envs):
            ctx = policy.book.context_ids(b)
            budgets.append(len(ctx) + max(len(c) for c in policy.candidates))
            ref = torch.tensor([sequence_logprob(model, ctx, c) for c in policy.candidates], dtype=torch.float64)
            errors.append((ref - scores[b]).abs().max().item())

    original = policy.scores

    def recording(*args, **kwargs):
        policy.last_scores = original(*args, **kwargs)
        return policy.last_scores

    policy.scores = recording
    with pytest.warns(UserWarning, match="token budget"):
        taken = rollout(policy, check=check)
    assert max(errors) < 1e-5
    assert max(budgets) <= 50  # the context + the longest action always fit the token budget
    assert set(taken.flatten().tolist()) <= set(actions) and len(set(taken.flatten().tolist())) > 1


def test_context_round_trips_through_the_template(tiny):
    """serialised -> tokenised -> scored: the policy's context decodes to the template's text of the same rows."""
    model, tokenizer = tiny
    template = get_template("compact")
    policy = LMPolicy(model, tokenizer, template, range(5), greedy=True, context=50, max_tokens=500)
    rows = {"state": [], "action": [], "reward": [], "step": []}
    B, steps = 2, 12
    policy.reset(B)
    obs, prev_a, prev_r, t = torch.tensor([4, 7]), torch.zeros(B, dtype=torch.long), torch.zeros(B), torch.zeros(
        B, dtype=torch.long)
    for step in range(steps):
        a = policy.act(obs, prev_a, prev_r, t, torch.full((B,), step == 0))
        for key, value in (("state", obs[0]), ("action", a[0]), ("step", t[0])):
            rows[key].append(int(value))
        rows["reward"].append(0.5 if int(a[0]) == 1 else 0.0)
        prev_a, prev_r = a, torch.tensor([0.5 if int(x) == 1 else 0.0 for x in a])
        t = (t + 1) % 5
        obs = (obs + a + 1) % 9
    text = tokenizer.decode(policy.book.context_ids(0))
    done = {k: v[:-1] for k, v in rows.items()}
    expected = template.render(done) + template.prompt({k: v[-1] for k, v in rows.items()})
    assert text == expected
    parsed = template.parse(text)
    assert [r["state"] for r in parsed] == done["state"] and [r["action"] for r in parsed] == done["action"]
    assert [r["reward"] for r in parsed] == done["reward"]


def test_valid_mask_is_respected(tiny):
    model, tokenizer = tiny
    policy = LMPolicy(model, tokenizer, "compact", range(5), greedy=False, generator=torch.Generator().manual_seed(1))
    policy.reset(4)
    valid = torch.tensor([[1, 0, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    zeros = torch.zeros(4, dtype=torch.long)
    for step in range(30):
        a = policy.act(zeros + step % 9, zeros, torch.zeros(4), zeros + step % 5, torch.full((4,), step == 0), valid)
        assert bool(valid[torch.arange(4), a].all())
    with pytest.raises(ValueError, match="at least one valid action"):
        policy.act(zeros, zeros, torch.zeros(4), zeros, torch.zeros(4, dtype=torch.bool), torch.zeros(4, 5, dtype=bool))


def test_lm_policy_runs_in_context_on_darkroom(tiny, darkroom3):
    from ad.commands.evaluate import pick_tasks
    from ad.evaluate import run_in_context
    from ad.history import HistoryReader
    from ad.registry import env_factory

    model, tokenizer = tiny
    reader = HistoryReader(darkroom3)
    tasks = pick_tasks(reader, "all", None)
    setup = env_factory("darkroom")(reader.metadata, tasks, 2)
    policy = LMPolicy(model.float(), tokenizer, "compact", range(setup.num_actions), context=30, max_tokens=400,
                      generator=torch.Generator().manual_seed(0))
    seen = []
    act = policy.act
    policy.act = lambda *args: seen.append(act(*args)) or seen[-1]
    result = run_in_context(policy, setup, episodes=3, progress=False)
    model.double()
    assert result.returns.shape == (len(tasks), 2, 3)
    actions = torch.stack(seen)
    assert actions.min() >= 0 and actions.max() < setup.num_actions


def test_generate_policy_counts_invalid_outputs(tiny):
    model, tokenizer = tiny  # random weights: generated text is mostly not an action
    policy = GeneratePolicy(model, tokenizer, "compact", range(5), greedy=True, max_new_tokens=3,
                            generator=torch.Generator().manual_seed(0))
    taken = rollout(policy, steps=6, B=2)
    assert policy.decisions == 12 and 0 < policy.invalid <= 12 and policy.invalid_examples
    assert set(taken.flatten().tolist()) <= set(range(5))
    assert policy.parse("3 r0") == 3 and policy.parse("9") is None and policy.parse("x") is None
    strict = GeneratePolicy(model, tokenizer, "compact", range(5), greedy=True, max_new_tokens=3, on_invalid="error")
    with pytest.raises(UserError, match="not a valid action"):
        rollout(strict, steps=6, B=2)


def test_bad_policy_arguments(tiny):
    model, tokenizer = tiny
    with pytest.raises(UserError):
        LMPolicy(model, tokenizer, "compact", [])
    with pytest.raises(UserError, match="unknown template"):
        LMPolicy(model, tokenizer, "nope", range(5))
    with pytest.raises(UserError, match="on_invalid"):
        GeneratePolicy(model, tokenizer, "compact", range(5), on_invalid="replace")
    policy = LMPolicy(model, tokenizer, "compact", range(5))
    policy.reset(2)
    zeros = torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="lockstep"):
        policy.act(zeros, zeros, torch.zeros(2), zeros, torch.tensor([True, False]))
    assert np.isfinite(policy.scores(zeros, zeros, torch.zeros(2), zeros, torch.ones(2, dtype=torch.bool))).all()


def test_generate_policy_acts_with_open_text(tiny):
    model, tokenizer = tiny
    policy = GeneratePolicy(model, tokenizer, "rollout", None, on_invalid="error", greedy=True, max_new_tokens=4)
    policy.reset(2)
    texts = policy.act(["hi", "yo"], ["", ""], [0.0, 0.0], [0, 0], torch.ones(2, dtype=torch.bool))
    assert isinstance(texts, list) and all(isinstance(t, str) for t in texts) and policy.invalid == 0
    policy.act(["more", "text"], texts, [0.5, 0.25], [1, 1], torch.zeros(2, dtype=torch.bool))
    context = tokenizer.decode(policy.book.context_ids(0))
    assert context == f"prompt: hi\ncompletion: {texts[0]}\nreward: 0.5000\n###\nprompt: more\ncompletion: "
    with pytest.raises(UserError, match="on_invalid='error'"):
        GeneratePolicy(model, tokenizer, "rollout", None)
    with pytest.raises(UserError, match="GeneratePolicy"):
        LMPolicy(model, tokenizer, "rollout", None)
    with pytest.raises(RuntimeError, match="reset"):
        LMPolicy(model, tokenizer, "compact", range(5)).act(*[torch.zeros(1, dtype=torch.long)] * 4,
                                                           torch.ones(1, dtype=torch.bool))
