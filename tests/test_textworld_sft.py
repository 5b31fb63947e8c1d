"""SFT on gold paths: loss only on the command tokens (the scorer's tokens), LoRA trained, base frozen."""
from __future__ import annotations

import copy

import torch

from tasks.textworld.games import GameOptions
from tasks.textworld.rollouts import fold_games, gold_demonstrations
from tasks.textworld.scoring import encode_commands, encode_prompts
from tasks.textworld.sft import sft_rows, train_sft

LORA = {"lora_r": 2, "lora_alpha": 4.0, "lora_dropout": 0.0, "target_modules": ["all-linear"]}


def _tiny(tmp_path):
    from models.lm.tiny import build_tiny
    from ad.pretrained import load_base

    return load_base(str(build_tiny(tmp_path / "tiny", width=32, max_positions=1024)))


def test_gold_demonstrations_solve_their_games_within_the_limit():
    options = GameOptions(step_limit=30)
    demos = gold_demonstrations(fold_games(options, "train", 3, 0), options, history=1)
    assert all(d.success and d.terminated[-1] for d in demos)
    assert all(p.endswith("Action:") for d in demos for p in d.prompts)


def test_labels_cover_exactly_the_command_tokens(tmp_path):
    _, tokenizer = _tiny(tmp_path)
    options = GameOptions(step_limit=3)
    demos = gold_demonstrations(fold_games(options, "train", 1, 0), options, history=1)
    rows = sft_rows(tokenizer, demos, max_prompt_tokens=50)
    prompts = encode_prompts(tokenizer, demos[0].prompts, 50)
    commands = encode_commands(tokenizer, demos[0].actions)
    for row, p, c in zip(rows, prompts, commands):
        assert row["input_ids"] == p + c
        assert row["labels"] == [-100] * len(p) + c


def test_sft_trains_lora_only(tmp_path):
    model, tokenizer = _tiny(tmp_path)
    before = copy.deepcopy(model.state_dict())
    options = GameOptions(step_limit=4)
    demos = gold_demonstrations(fold_games(options, "train", 2, 0), options, history=1)
    trained = train_sft(model, tokenizer, demos, tmp_path / "sft", epochs=1.0, lr=1e-2, batch_size=4,
                        max_prompt_tokens=64, lora=LORA, seed=0, progress=False)
    lora = {n: p for n, p in trained.named_parameters() if "lora_B" in n}
    assert lora and any(float(p.abs().sum()) > 0 for p in lora.values())  # B starts at zero
    base = trained.get_base_model().state_dict()
    for name, value in before.items():
        key = next((k for k in base if k.replace(".base_layer", "") == name), name)
        torch.testing.assert_close(base[key], value)
