"""ADPolicy (one KV cache for B envs) acts exactly like the full-recompute reference under the window policy."""
import pytest
import torch

from models.rl.config import ADConfig
from models.rl.model import ADTransformer
from benchmarks.helpers.references import ADPolicyReference
from models.rl.policy import ADPolicy

torch.set_num_threads(1)


def make_model(layout: str, context: int = 12, **extra) -> ADTransformer:
    cfg = ADConfig(layout=layout, n_layer=2, n_head=2, n_embd=32, n_ff=64, context=context, num_states=9,
                   num_actions=5, episode_length=7, **extra)
    torch.manual_seed(0)
    return ADTransformer(cfg).double()  # float64: no near-tie can flip an argmax


def rollout(policy_cls, model, steps=300, B=4, seed=0):
    """Act in a toy lockstep env whose next state depends on the action (so actions feed back)."""
    policy = policy_cls(model, greedy=True)
    policy.reset(B)
    g = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 9, (B,), generator=g)
    prev_a, prev_r, t = torch.zeros(B, dtype=torch.long), torch.zeros(B), torch.zeros(B, dtype=torch.long)
    actions, logits = [], []
    for step in range(steps):
        first = torch.full((B,), step == 0)
        lg = policy.logits(obs, prev_a, prev_r, t, first)
        a = lg.argmax(-1)
        actions.append(a)
        logits.append(lg)
        prev_a, prev_r = a, (a == obs % 5).double()
        t = (t + 1) % 7
        obs = torch.where(t == 0, torch.full_like(obs, 4), (obs * 2 + a + 1) % 9)
    return torch.stack(actions), torch.stack(logits)


@pytest.mark.parametrize("layout", ["transition", "separate"])
def test_cached_policy_equals_reference(layout):
    model = make_model(layout)
    fast_actions, fast_logits = rollout(ADPolicy, model)
    ref_actions, ref_logits = rollout(ADPolicyReference, model)
    assert torch.equal(fast_actions, ref_actions)
    torch.testing.assert_close(fast_logits, ref_logits, atol=1e-10, rtol=1e-10)
    assert len(set(fast_actions.flatten().tolist())) > 1  # the test is not vacuous


def test_window_policy_keeps_the_recent_half():
    model = make_model("transition", context=8)
    policy = ADPolicy(model)
    policy.reset(2)
    zeros = torch.zeros(2, dtype=torch.long)
    sizes = []
    for step in range(20):
        policy.act(zeros + step % 9, zeros, torch.zeros(2), zeros + step % 7, torch.full((2,), step == 0))
        sizes.append(policy.window.n)
    assert sizes[:8] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert sizes[8:13] == [5, 6, 7, 8, 5]  # full (8) -> keep 4 + the new state
    assert policy.cache.length == policy.window.n


def test_sampling_and_bad_inputs():
    model = make_model("separate")
    policy = ADPolicy(model, greedy=False, generator=torch.Generator().manual_seed(0))
    policy.reset(3)
    z = torch.zeros(3, dtype=torch.long)
    a = policy.act(z, z, torch.zeros(3), z, torch.ones(3, dtype=torch.bool))
    assert a.shape == (3,) and bool(((a >= 0) & (a < 5)).all())
    with pytest.raises(ValueError, match="lockstep"):
        policy.act(z, z, torch.zeros(3), z, torch.tensor([True, False, False]))
    with pytest.raises(ValueError, match="episode_length"):
        policy.act(z, z, torch.zeros(3), z + 7, torch.zeros(3, dtype=torch.bool))


@pytest.mark.parametrize("layout", ["transition", "separate"])
def test_vector_states_and_continuous_rewards(layout):
    cfg = ADConfig(layout=layout, n_layer=1, n_head=2, n_embd=16, n_ff=32, context=6, state_dim=3,
                   num_actions=4, episode_length=5, reward_kind="continuous")
    torch.manual_seed(0)
    model = ADTransformer(cfg).double()
    fast, ref = ADPolicy(model), ADPolicyReference(model)
    fast.reset(2)
    ref.reset(2)
    g = torch.Generator().manual_seed(0)
    a, r = torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.float64)
    for step in range(40):
        obs = torch.randn(2, 3, generator=g, dtype=torch.float64)
        t = torch.full((2,), step % 5)
        first = torch.full((2,), step == 0)
        lf, lr = fast.logits(obs, a, r, t, first), ref.logits(obs, a, r, t, first)
        torch.testing.assert_close(lf, lr, atol=1e-10, rtol=1e-10)
        a, r = lf.argmax(-1), torch.randn(2, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("layout", ["transition", "separate"])
def test_cached_policy_equals_reference_with_grid_and_position_embeddings(layout):
    model = make_model(layout, grid_size=3, position_embedding=True)
    fast_actions, fast_logits = rollout(ADPolicy, model, steps=120)
    ref_actions, ref_logits = rollout(ADPolicyReference, model, steps=120)
    assert torch.equal(fast_actions, ref_actions)
    torch.testing.assert_close(fast_logits, ref_logits, rtol=0, atol=1e-9)


def test_cached_policy_equals_reference_without_the_time_step_embedding():
    model = make_model("transition", grid_size=3, position_embedding=True, time_embedding=False)
    fast_actions, fast_logits = rollout(ADPolicy, model, steps=120)
    ref_actions, ref_logits = rollout(ADPolicyReference, model, steps=120)
    assert torch.equal(fast_actions, ref_actions)
    torch.testing.assert_close(fast_logits, ref_logits, rtol=0, atol=1e-9)
