"""What the RLHF history log relies on in trl's GRPOTrainer, pinned: a trl update that changes it fails here.

The log uses public extension points only (reward function, ``compute_loss``, a forward hook); it relies on trl's
behaviour in three places (tasks/rlhf/trainer.py, section "trl behaviour"): the loss-pass forward's output carries
the completion logprobs, prompts are tokenised as ``tokenizer(text=prompts)``, and a group's advantages rise with
its rewards (the row matching pairs tied rows by rank).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ad.config import make_config

RANDOM_REWARD = '''
import random
_rng = random.Random(0)

def score(prompts, completions, **kw):
    """A noisy reward: identical completions get different rewards."""
    return [_rng.random() for _ in completions]
'''


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from benchmarks.helpers.tiny_lm import build_tiny  # test-only helper; tasks/ itself never imports models

    return str(build_tiny(tmp_path_factory.mktemp("tiny") / "model", n_layer=1, width=32))


def test_no_private_trl_method_is_overridden():
    from trl import GRPOTrainer

    from tasks.rlhf.trainer import LoggingGRPOTrainer

    ours = {name for name in vars(LoggingGRPOTrainer) if name.startswith("_") and not name.startswith("__")}
    assert ours == set()
    assert set(vars(LoggingGRPOTrainer)) - {"__module__", "__doc__", "__init__", "__qualname__",
                                            "__firstlineno__", "__static_attributes__"} == {"scored", "compute_loss"}
    assert callable(GRPOTrainer.compute_loss)


def test_rows_with_equal_content_pair_by_rank():
    from tasks.rlhf.trainer import LossRows, match_rows

    p, c1, c2 = (1, 2), (5, 6), (7,)
    # generation order: two identical completions with rewards 0.9 and 0.1, one other completion
    loss = LossRows(prompt_ids=[p, p, p], completion_ids=[c2, c1, c1], advantages=[0.0, -1.0, 1.0],
                    logps=[np.zeros(1), np.zeros(2), np.zeros(2)])
    assert match_rows([p, p, p], [c1, c1, c2], [0.9, 0.1, 0.5], loss) == [2, 1, 0]
    with pytest.raises(RuntimeError, match="not supported"):
        match_rows([p, p, p], [c1, c2, c2], [0.9, 0.1, 0.5], loss)


def test_logprobs_from_logits_when_trl_returns_logits():
    from types import SimpleNamespace

    from tasks.rlhf.trainer import loss_pass_logps

    torch.manual_seed(0)
    logits = torch.randn(3, 7, 11)  # (b, P + C, V)
    ids = torch.randint(0, 11, (3, 4))  # (b, C)
    expected = torch.log_softmax(logits[:, 2:6] / 0.7, -1).gather(-1, ids[..., None])[..., 0]
    chunks = [SimpleNamespace(logits=logits[:2]), SimpleNamespace(logits=logits[2:])]
    torch.testing.assert_close(loss_pass_logps(chunks, ids, 0.7), expected)
    fused = SimpleNamespace(log_probs=torch.randn(3, 6))  # (b, L - 1)
    torch.testing.assert_close(loss_pass_logps([fused], ids, 0.7), fused.log_probs[:, -4:])
    with pytest.raises(RuntimeError, match="not supported"):
        loss_pass_logps([fused, fused], ids, 0.7)


def test_prompts_tokenised_as_trl_does(tiny_model):
    from ad.lm.pretrained import load_base
    from tasks.rlhf.trainer import tokenize_prompts

    _, tokenizer = load_base(tiny_model)
    prompts = ["The old lighthouse keeper", "On the first day of spring,"]
    assert tokenize_prompts(tokenizer, prompts) == [tokenizer(p)["input_ids"] for p in prompts]


def test_noisy_rewards_of_identical_completions_keep_trl_advantages(tmp_path, tiny_model, monkeypatch):
    """Near-greedy sampling makes a group's completions identical; a noisy reward still gives them different
    advantages. Every logged advantage must be trl's GRPO advantage of the logged reward in its group."""
    from ad.history import HistoryReader
    from tasks.rlhf.config import GenerateConfig
    from tasks.rlhf.generate import generate

    (tmp_path / "rlhf_noisy_reward.py").write_text(RANDOM_REWARD)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "d"
    cfg = make_config(GenerateConfig, dict(out=str(out), model=tiny_model, max_steps=2, chunk_steps=2, num_generations=4,
                                           prompts_per_step=2, max_new_tokens=4, temperature=1e-4, eval_prompts=0,
                                           threads=1, tensorboard=False, plots=False, progress=False,
                                           reward="rlhf_noisy_reward:score"))
    generate(cfg)
    table = HistoryReader(str(out)).table().to_pandas()
    assert len(table) == 2 * 8
    groups = table.groupby(["update", "state"])
    assert groups.ngroups == 4 and all(len(g) == 4 for _, g in groups)
    identical = 0
    for _, g in groups:
        r = g["reward"].to_numpy(np.float64)
        expected = (r - r.mean()) / (r.std(ddof=1) + 1e-4)  # trl: scale_rewards="group", unbiased std
        np.testing.assert_allclose(g["advantage"].to_numpy(), expected, atol=1e-4)
        identical += g["completion_ids"].map(tuple).duplicated().sum()
        for lp in g["logprob"]:
            assert all(math.isfinite(x) for x in lp)
    assert identical > 0  # the tie-breaking path was exercised
