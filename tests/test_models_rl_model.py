"""The AD transformer: cached inference = full forward, masked losses, save/load, learning a known answer."""
import pytest
import torch

from ad.errors import UserError
from models.rl.config import ADConfig
from models.rl.model import ADTransformer
from benchmarks.helpers.synthetic_goals import synthetic_batches

torch.set_num_threads(1)


def tiny(layout="transition", **kw) -> ADConfig:
    values = dict(layout=layout, n_layer=2, n_head=2, n_embd=32, n_ff=64, context=16, num_states=9,
                  num_actions=5, episode_length=6, logprob_weight=0.1)
    values.update(kw)
    return ADConfig(**values)


def window(B=3, T=16, vector=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(B, T, vector, generator=g) if vector else torch.randint(0, 9, (B, T), generator=g)
    return (states, torch.randint(0, 5, (B, T), generator=g), torch.randint(0, 2, (B, T), generator=g).float(),
            (torch.arange(T) % 6).expand(B, T))


@pytest.mark.parametrize("layout", ["transition", "separate"])
@pytest.mark.parametrize("vector", [0, 4])
def test_cached_chunks_equal_full_forward(layout, vector):
    extra = dict(num_states=0, state_dim=vector, reward_kind="continuous") if vector else {}
    model = ADTransformer(tiny(layout, **extra)).eval()
    states, actions, rewards, timesteps = window(vector=vector)
    x = model.tokens(states, actions, rewards, timesteps)  # (B, L, C)
    full = model.transformer(x)
    cache = model.new_cache(3)
    pieces, i = [], 0
    for n in (1, 1, 3, 2, 7, 1000):  # single tokens and chunks, as the policy feeds them
        pieces.append(model.transformer(x[:, i:i + n], cache))
        i += n
    torch.testing.assert_close(torch.cat(pieces, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == x.size(1) == model.config.max_tokens


@pytest.mark.parametrize("layout", ["transition", "separate"])
def test_forward_shapes_and_causality(layout):
    model = ADTransformer(tiny(layout)).eval()
    states, actions, rewards, timesteps = window()
    out = model(states, actions, rewards, timesteps)
    assert out["action"].shape == (3, 16, 5) and out["state"].shape == (3, 16, 9)
    assert out["reward"].shape == (3, 16, 2) and out["logprob"].shape == (3, 16)
    # the action head at t must not see a_t, r_t or anything later
    actions2, rewards2 = actions.clone(), rewards.clone()
    actions2[:, 8:] = (actions2[:, 8:] + 1) % 5
    rewards2[:, 8:] = 1 - rewards2[:, 8:]
    out2 = model(states, actions2, rewards2, timesteps)
    torch.testing.assert_close(out2["action"][:, :9], out["action"][:, :9])


def test_masked_positions_do_not_change_the_loss():
    model = ADTransformer(tiny()).eval()
    states, actions, rewards, timesteps = window()
    mask = torch.ones(3, 16, dtype=torch.bool)
    mask[:, 12:] = False  # right padding
    batch = dict(states=states, actions=actions, rewards=rewards, timesteps=timesteps, mask=mask,
                 logprobs=torch.zeros(3, 16))
    loss, metrics = model.compute_loss(batch)
    batch2 = dict(batch, actions=batch["actions"].clone(), rewards=batch["rewards"].clone())
    batch2["actions"][:, 12:] = (batch2["actions"][:, 12:] + 2) % 5
    batch2["rewards"][:, 12:] = 1 - batch2["rewards"][:, 12:]
    loss2, _ = model.compute_loss(batch2)
    torch.testing.assert_close(loss, loss2)
    assert set(metrics) >= {"action_nll", "action_acc", "reward_acc", "state_acc", "logprob_loss", "loss"}


def test_head_with_zero_weight_is_off():
    model = ADTransformer(tiny(state_weight=0.0, reward_weight=0.0, logprob_weight=0.0))
    out = model(*window())
    assert set(out) == {"action"}
    assert not hasattr(model, "outcome")


def test_loss_falls_on_a_known_answer():
    """a_t = (s_t + 2) % 5 with probability 0.92 (else uniform): the best action NLL is about 0.39."""
    torch.manual_seed(0)
    model = ADTransformer(tiny(context=40, num_states=9, episode_length=10, logprob_weight=0.0))
    batches = synthetic_batches(8, 32, 40, num_states=9, num_actions=5, episode_length=10, seed=1, goal=2,
                                p_start=0.9, p_end=0.9)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = last = None
    for step in range(100):
        loss, metrics = model.compute_loss(batches[step % 8])
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = metrics if first is None else first
        last = metrics
    assert first["action_nll"] > 1.5  # ~log(5) at start
    assert last["action_nll"] < 0.8
    assert last["action_acc"] > 0.85
    assert last["reward_acc"] > 0.85


def test_save_load_gives_identical_outputs(tmp_path):
    model = ADTransformer(tiny("separate")).eval()
    model.save_pretrained(tmp_path / "m")
    loaded = ADTransformer.from_pretrained(tmp_path / "m").eval()
    assert loaded.config == model.config
    a, b = model(*window()), loaded(*window())
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=0, rtol=0)


def test_unreadable_model_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not a saved AD model"):
        ADTransformer.from_pretrained(tmp_path)
    ADTransformer(tiny()).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(UserError, match="cannot load weights"):
        ADTransformer.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UserError, match="not a valid AD model config"):
        ADTransformer.from_pretrained(tmp_path)


@pytest.mark.parametrize("bad, match", [
    (dict(layout="interleaved"), "layout"),
    (dict(n_embd=30, n_head=4), "multiple of --n-head"),
    (dict(attn_dropout=1.0), "--attn-dropout"),
    (dict(action_weight=0.0, state_weight=0.0, reward_weight=0.0, logprob_weight=0.0), "loss weights"),
    (dict(num_states=9, state_dim=3), "not both"),
])
def test_bad_config_is_a_user_error(bad, match):
    with pytest.raises(UserError, match=match):
        tiny(**bad)


def test_grid_embedding_shares_rows_and_columns():
    model = ADTransformer(tiny(grid_size=3))
    emb = model._embed_states(torch.tensor([[0, 1, 3, 4]]))[0]  # cells (0,0) (0,1) (1,0) (1,1)
    torch.testing.assert_close(emb[0] + emb[3], emb[1] + emb[2])  # row + column decomposition
    with pytest.raises(UserError, match="--grid-size 4 needs --num-states = 16"):
        tiny(grid_size=4)


def test_bf16_autocast_runs_attention_in_float32_on_cpu(monkeypatch):
    import models.rl.model as model_module

    seen = []
    sdpa = model_module.F.scaled_dot_product_attention

    def recording(q, k, v, **kw):
        seen.append(q.dtype)
        return sdpa(q, k, v, **kw)

    model = ADTransformer(tiny()).eval()
    states, actions, rewards, timesteps = window()
    full = model(states, actions, rewards, timesteps)["action"]
    monkeypatch.setattr(model_module.F, "scaled_dot_product_attention", recording)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = model(states, actions, rewards, timesteps)["action"]
        assert model.blocks[0].attn.qkv(torch.zeros(1, 32)).dtype == torch.bfloat16  # the linear layers: bfloat16
    assert seen == [torch.float32] * 2  # both blocks' attention: float32
    torch.testing.assert_close(mixed.float(), full, atol=0.1, rtol=0.05)  # bfloat16 rounding, no more
