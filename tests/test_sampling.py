"""Sampling at a temperature: the shared chooser, the RL-format policy (discrete and Box heads), the LM policy,
and `ad eval --temperature` (bad values exit 2)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from ad.commands.evaluate import EvalConfig
from ad.demo.report import in_context_lines
from ad.errors import UserError
from models.rl.box_actions import BoxActions
from models.rl.config import ADConfig
from models.rl.model import ADTransformer
from models.rl.policy import ADPolicy
from models.sampling import check_temperature, choose

torch.set_num_threads(1)


def frequencies(index: torch.Tensor, n: int) -> torch.Tensor:
    return torch.bincount(index.flatten(), minlength=n).double() / index.numel()


def test_choose_draws_from_the_tempered_distribution():
    logits = torch.tensor([[1.0, 0.0, -1.0, float("-inf")]]).double().expand(40_000, 4)
    for temperature in (0.5, 1.0, 2.0):
        drawn = choose(logits, False, torch.Generator().manual_seed(0), temperature)
        expected = torch.softmax(logits[0] / temperature, -1)
        assert drawn.shape == (40_000,)
        torch.testing.assert_close(frequencies(drawn, 4), expected, atol=0.01, rtol=0)  # ~5 standard errors
        assert not bool((drawn == 3).any())  # -inf: never drawn
    sharp = frequencies(choose(logits, False, torch.Generator().manual_seed(0), 0.5), 4)[0]
    assert sharp > 0.85 > 0.70 > frequencies(choose(logits, False, torch.Generator().manual_seed(0), 1.0), 4)[0]
    assert choose(logits[:3], True, None, 0.5).tolist() == [0, 0, 0]


def test_temperature_one_draws_what_plain_sampling_draws():
    logits = torch.randn(64, 5, generator=torch.Generator().manual_seed(3))
    plain = torch.multinomial(torch.softmax(logits, -1), 1, generator=torch.Generator().manual_seed(7)).squeeze(-1)
    assert torch.equal(choose(logits, False, torch.Generator().manual_seed(7)), plain)
    # (..., A) logits: one draw per leading index
    assert choose(logits.view(8, 8, 5), False, torch.Generator().manual_seed(7)).shape == (8, 8)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_temperatures_are_refused(bad):
    with pytest.raises(ValueError, match="temperature"):
        check_temperature(bad)
    with pytest.raises(ValueError, match="temperature"):
        ADPolicy(tiny_model(), temperature=bad)


def tiny_model(**extra) -> ADTransformer:
    cfg = ADConfig(n_layer=1, n_head=2, n_embd=16, n_ff=32, context=6, num_states=9, num_actions=5, episode_length=7,
                   **extra)
    torch.manual_seed(0)
    return ADTransformer(cfg).double()


def first_step(policy: ADPolicy, envs: int, box: bool = False):
    policy.reset(envs)
    z = torch.zeros(envs, dtype=torch.long)
    prev = torch.zeros(envs, 2, dtype=torch.float64) if box else z
    args = (z, prev, torch.zeros(envs), z, torch.ones(envs, dtype=torch.bool))
    return policy.logits(*args)[0], policy, args


@pytest.mark.parametrize("temperature", [0.3, 1.0])
def test_ad_policy_samples_at_its_temperature(temperature):
    model = tiny_model()
    with torch.no_grad():  # spread the logits so the temperature visibly matters
        model.action_head.weight.mul_(15.0)
    envs = 20_000
    logits, _, args = first_step(ADPolicy(model, greedy=False), envs)
    policy = ADPolicy(model, greedy=False, generator=torch.Generator().manual_seed(1), temperature=temperature)
    policy.reset(envs)
    drawn = policy.act(*args)
    expected = torch.softmax(logits / temperature, -1)
    assert expected.max() < 0.95  # not one action only: the frequencies say something
    assert temperature == 1.0 or (expected - torch.softmax(logits, -1)).abs().max() > 0.1  # T visibly matters
    torch.testing.assert_close(frequencies(drawn, 5), expected, atol=0.015, rtol=0)


def test_gaussian_head_std_scales_with_the_temperature():
    box = BoxActions([-1.0, -1.0], [1.0, 1.0], "gaussian")
    params = torch.tensor([[0.1, -0.2, -1.0, -0.5]]).expand(50_000, 4)  # small means: tanh barely bends the samples
    mean, log_std = box.gaussian(params[:1])
    for temperature in (0.25, 1.0):
        actions = box.choose(params, False, torch.Generator().manual_seed(0), temperature)
        u = torch.atanh(actions.clamp(-0.999999, 0.999999))  # the pre-squash sample
        torch.testing.assert_close(u.mean(0), mean[0], atol=0.01, rtol=0)
        torch.testing.assert_close(u.std(0), log_std[0].exp() * temperature, atol=0, rtol=0.03)


def test_bins_head_samples_at_its_temperature():
    box = BoxActions([-1.0], [1.0], "bins", bins=3)
    params = torch.tensor([[2.0, 0.0, -2.0]]).expand(40_000, 3)
    actions = box.choose(params, False, torch.Generator().manual_seed(0), 0.5)
    drawn = box.to_bins(actions)[:, 0]
    torch.testing.assert_close(frequencies(drawn, 3), torch.softmax(params[0] / 0.5, -1).double(), atol=0.01, rtol=0)


def test_lm_policy_samples_at_its_temperature(tmp_path):
    from ad.lm.pretrained import load_base
    from benchmarks.helpers.tiny_lm import build_tiny
    from models.lm.policy import LMPolicy

    model, tokenizer = load_base(str(build_tiny(tmp_path / "m", n_layer=1, width=32)))
    envs = 3000
    z = torch.zeros(envs, dtype=torch.long)
    args = (z, z, torch.zeros(envs), z, torch.ones(envs, dtype=torch.bool))
    reference = LMPolicy(model.double(), tokenizer, "compact", range(5))
    reference.reset(envs)
    scores = reference.scores(*args)[0]
    policy = LMPolicy(model, tokenizer, "compact", range(5), generator=torch.Generator().manual_seed(0),
                      temperature=0.2)
    policy.reset(envs)
    drawn = policy.act(*args)
    assert torch.softmax(scores.double() / 0.2, -1).max() < 0.9  # not degenerate: the frequencies say something
    torch.testing.assert_close(frequencies(drawn, 5), torch.softmax(scores.double() / 0.2, -1), atol=0.03, rtol=0)
    with pytest.raises(ValueError, match="temperature"):
        LMPolicy(model, tokenizer, "compact", range(5), temperature=0)


def test_eval_refuses_bad_temperatures(tmp_path):
    with pytest.raises(UserError, match="--temperature must be a finite number > 0"):
        EvalConfig(ckpt="runs/ad", data=str(tmp_path), temperature=0.0)
    with pytest.raises(UserError, match="--greedy takes no sampling"):
        EvalConfig(ckpt="runs/ad", data=str(tmp_path), greedy=True, temperature=0.5)
    proc = subprocess.run([sys.executable, "-m", "ad", "eval", "--ckpt", str(tmp_path), "--data", str(tmp_path),
                           "--temperature", "nan"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
    assert "--temperature" in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing written


def test_reports_say_how_the_policies_acted():
    summary = {"tasks": ["a"], "seeds": 1, "episodes": 2, "greedy": False, "optimal_mean_return": 1.0,
               "policies": {}}
    assert "sampled actions" in in_context_lines(summary, windows=())[0]
    assert "actions sampled at temperature 0.5." in in_context_lines(summary | {"temperature": 0.5}, windows=())[0]
    assert "greedy actions" in in_context_lines(summary | {"greedy": True}, windows=())[0]
    episode = summary | {"temperature": 2.0, "sampling": "episode"}
    assert "actions sampled at temperature 2, one draw per episode." in in_context_lines(episode, windows=())[0]
