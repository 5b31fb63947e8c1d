"""Exported adapters (benchmarks/helpers/textworld_saved.py): evaluating them elsewhere plays exactly the run's own
evaluation games, and bad adapter files are one-line user errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ad.config import make_config
from ad.errors import UserError
from ad.history import HistoryReader
from tasks.textworld.config import GenerateConfig

TINY = dict(eval_games=1, train_eval_games=1, sft_games=2, sft_epochs=1.0, sft_batch_size=4, ppo_iterations=1,
            ppo_games=1, ppo_epochs=1, ppo_batch_size=4, step_limit=3, history=1, max_prompt_tokens=96, lora_r=2,
            threads=1, progress=False)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from benchmarks.helpers.tiny_lm import build_tiny

    return str(build_tiny(tmp_path_factory.mktemp("tiny"), width=32, max_positions=1024))


@pytest.mark.slow  # ~20 s alone on 2 cores: a tiny LM through every phase, then the evaluations again
def test_exported_adapters_replay_the_runs_evaluations(tmp_path, tiny_model):
    from safetensors import safe_open

    from tasks.textworld.generate import generate
    from benchmarks.helpers.textworld_outcomes import game_outcomes
    from benchmarks.helpers.textworld_saved import evaluate_saved, export_adapters

    run = make_config(GenerateConfig, {"out": str(tmp_path / "run"), "model": tiny_model, **TINY})
    generate(run)
    files = export_adapters(tmp_path / "run" / "_run", tmp_path / "back", dtype="float32")
    half = export_adapters(tmp_path / "run" / "_run", tmp_path / "half")
    with safe_open(str(half["ppo"]), framework="pt") as f:
        assert f.metadata()["iteration"] == "1"
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
        assert {"value_head.weight", "value_head.bias"} <= set(f.keys())
    again = make_config(GenerateConfig, {"out": str(tmp_path / "again"), "model": tiny_model, **TINY})
    results = evaluate_saved(again, files["sft"], files["ppo"])
    assert set(results) == {"sft-test", "sft-train", "ppo-test", "ppo-train"}
    before, after = game_outcomes(str(tmp_path / "run")), game_outcomes(str(tmp_path / "again"))
    for unit in results:
        key = f"{unit} (run 0)"
        assert after[key] == before[key]  # same games, same greedy commands, ends and scores
    # the same numbers, not only the same choices: per-token log-probabilities and the value head's values
    first, second = HistoryReader(tmp_path / "run"), HistoryReader(tmp_path / "again")
    for unit in results:
        a, b = first.table(tasks=[unit]).to_pydict(), second.table(tasks=[unit]).to_pydict()
        for x, y in zip(a["logprob"], b["logprob"], strict=True):
            assert np.allclose(x, y, atol=1e-5)
        assert np.allclose(a["value"], b["value"], atol=1e-5, equal_nan=True)
    ppo_start = first.table(tasks=["ppo-test"]).to_pydict()
    sft_start = first.table(tasks=["sft-test"]).to_pydict()
    assert not np.allclose(ppo_start["logprob"][0], sft_start["logprob"][0], atol=1e-7)  # PPO changed the policy
    assert np.isfinite(ppo_start["value"]).all() and np.isnan(sft_start["value"]).all()
    assert (tmp_path / "again" / "_run" / "saved.json").is_file()


def test_missing_or_foreign_adapter_files_are_user_errors(tmp_path):
    from benchmarks.helpers.textworld_saved import load_adapter

    with pytest.raises(UserError, match="does not exist"):
        load_adapter(tmp_path / "nope.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a safetensors file")
    with pytest.raises(UserError, match="not a safetensors adapter file"):
        load_adapter(junk)


def test_an_adapter_of_another_rank_or_no_lora_weights_is_a_user_error(tmp_path, tiny_model):
    from peft import get_peft_model, get_peft_model_state_dict

    from ad.config.groups import peft_lora_config
    from ad.lm.pretrained import load_base
    from benchmarks.helpers.textworld_saved import with_adapter

    cfg = make_config(GenerateConfig, {"model": tiny_model, **TINY})
    model, _ = load_base(tiny_model)
    rank4 = get_peft_model(model, peft_lora_config({**cfg.lora_dict(), "lora_r": 4}))
    tensors = {k: v.detach().clone() for k, v in get_peft_model_state_dict(rank4).items()}
    model, _ = load_base(tiny_model)
    with pytest.raises(UserError, match="--lora-r 2"):
        with_adapter(model, cfg, tensors, tmp_path / "rank4.safetensors")
    model, _ = load_base(tiny_model)
    with pytest.raises(UserError, match="lacks"):
        with_adapter(model, cfg, {"something.else": torch.zeros(1)}, tmp_path / "other.safetensors")


def test_a_ppo_file_must_be_a_ppo_adapter_of_the_same_lora(tmp_path):
    from safetensors.torch import save_file

    from benchmarks.helpers.textworld_saved import evaluate_saved

    lora = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.zeros(2, 8)}
    save_file(lora, str(tmp_path / "sft.safetensors"))
    save_file({k: torch.zeros(4, 8) for k in lora} | {"value_head.weight": torch.zeros(1, 8)},
              str(tmp_path / "other.safetensors"))
    cfg = make_config(GenerateConfig, {"out": str(tmp_path / "out"), **TINY})
    with pytest.raises(UserError, match="no value head"):
        evaluate_saved(cfg, tmp_path / "sft.safetensors", tmp_path / "sft.safetensors")
    with pytest.raises(UserError, match="different LoRA weights"):
        evaluate_saved(cfg, tmp_path / "sft.safetensors", tmp_path / "other.safetensors")
    assert not (tmp_path / "out").exists()  # nothing written


def test_the_cli_gives_one_line_and_exit_2_for_a_missing_file(tmp_path, capsys):
    from benchmarks.textworld_saved import main

    assert main(["export", str(tmp_path / "no-run"), str(tmp_path / "dest")]) == 2
    assert main(["evaluate", "--sft", str(tmp_path / "none.safetensors"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)
    assert "no SFT adapter" in err[0] and "does not exist" in err[1]
