"""SFT on gold paths: loss only on the command tokens (the scorer's tokens), LoRA trained, base frozen."""
from __future__ import annotations

import copy

import pytest
import torch

from tasks.textworld.games import GameOptions
from tasks.textworld.prompts import split_head
from tasks.textworld.rollouts import fold_games, gold_demonstrations
from tasks.textworld.scoring import encode_commands, encode_prompts
from tasks.textworld.sft import sft_rows, sft_trainer, train_sft

LORA = {"lora_r": 2, "lora_alpha": 4.0, "lora_dropout": 0.0, "target_modules": ["all-linear"]}


def _tiny(tmp_path):
    from benchmarks.helpers.tiny_lm import build_tiny
    from ad.lm.pretrained import load_base

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


def test_command_only_loss_equals_trl_loss_and_gradients(tmp_path):
    """CommandLossSFTTrainer reads the LM head on the labelled tokens only; its loss and LoRA gradients equal
    trl's SFTTrainer.compute_loss (the fused head over every position) on the same batch."""
    from trl import SFTTrainer

    model, tokenizer = _tiny(tmp_path)
    options = GameOptions(step_limit=4)
    demos = gold_demonstrations(fold_games(options, "train", 2, 0), options, history=1)
    rows = sft_rows(tokenizer, demos, max_prompt_tokens=64)
    trainer = sft_trainer(model, tokenizer, rows, tmp_path / "sft", epochs=1.0, lr=1e-2, batch_size=4, lora=LORA,
                          seed=0, progress=False)
    torch.manual_seed(0)
    for name, p in trainer.model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.3)  # a non-trivial adapter (B starts at zero)
    batch = next(iter(trainer.get_train_dataloader()))
    assert int((batch["labels"] != -100).sum()) < batch["labels"].numel() // 4  # mostly prompt positions
    trainer.model.train()
    results = []
    for compute in (trainer.compute_loss, lambda m, b: SFTTrainer.compute_loss(trainer, m, b)):
        trainer.model.zero_grad()
        loss = compute(trainer.model, dict(batch))
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        results.append((float(loss), grads))
    (ours, ours_grads), (trl_loss, trl_grads) = results
    assert ours == pytest.approx(trl_loss, rel=1e-5)
    assert ours_grads.keys() == trl_grads.keys() and ours_grads
    for name, grad in ours_grads.items():
        torch.testing.assert_close(grad, trl_grads[name], atol=1e-5, rtol=1e-4)
    assert trainer.token_accuracy and 0.0 <= trainer.token_accuracy[-1] <= 1.0


def _long_pinned_prompt():
    """A real gold-path prompt late in a game: task line, move list and the pinned recipe above the steps."""
    options = GameOptions(step_limit=32)
    demo = gold_demonstrations(fold_games(options, "train", 1, 0), options, history=1,
                               pinned=["read cookbook"])[0]
    return max(demo.prompts, key=len)


def test_split_head_parts_join_to_the_prompt():
    prompt = _long_pinned_prompt()
    head, steps = split_head(prompt)
    assert head + steps == prompt
    assert head.startswith("# TASK") and "Moves so far:" in head and "Result of 'read cookbook'" in head
    assert steps.startswith("# STEP ") and "# STEP" not in head
    assert split_head("no steps") == ("no steps", "")


def test_a_prompt_over_the_budget_keeps_its_head_and_its_newest_tokens(tmp_path):
    _, tokenizer = _tiny(tmp_path)
    prompt = _long_pinned_prompt()
    whole = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    head = tokenizer(split_head(prompt)[0], add_special_tokens=False)["input_ids"]
    assert encode_prompts(tokenizer, [prompt], len(whole)) == [whole]  # fits: untouched
    budget = 2 * len(head)
    assert len(whole) > budget
    (cut,) = encode_prompts(tokenizer, [prompt], budget)
    assert len(cut) == budget and cut[:len(head)] == head  # the head whole, then the newest step tokens
    assert tokenizer.decode(cut).endswith("Action:") and cut[-10:] == whole[-10:]
    (small,) = encode_prompts(tokenizer, [prompt], 40)  # a head over half the budget is cut to half
    assert len(small) == 40 and small[:20] == head[-20:] and small[-10:] == whole[-10:]


def _first_step_gradients(tmp_path, micro: int, name: str):
    """LoRA gradients of the first SFT step over 4 demonstrated moves, in micro-batches of ``micro``, as the
    optimiser is about to use them."""
    from transformers import TrainerCallback

    model, tokenizer = _tiny(tmp_path)
    options = GameOptions(step_limit=4)
    demos = gold_demonstrations(fold_games(options, "train", 1, 0), options, history=1)
    rows = sft_rows(tokenizer, demos, max_prompt_tokens=64)[:4]
    assert len({sum(x != -100 for x in r["labels"]) for r in rows}) > 1  # micro-batches of unequal token counts
    grads: dict[str, torch.Tensor] = {}

    class Capture(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            grads.update({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})

    torch.manual_seed(0)
    trainer = sft_trainer(model, tokenizer, rows, tmp_path / name, epochs=1.0, lr=1e-2, batch_size=4, lora=LORA,
                          seed=0, progress=False, micro_batch_size=micro, callbacks=[Capture()])
    for pname, p in trainer.model.named_parameters():
        if "lora_B" in pname:
            torch.nn.init.normal_(p, std=0.3, generator=torch.Generator().manual_seed(1))
    trainer.args.max_grad_norm = 0.0  # the raw gradient (no clipping)
    trainer.train()
    assert trainer.state.global_step == 1
    return grads, trainer


def test_micro_batches_take_the_same_step_as_the_whole_batch(tmp_path):
    whole, _ = _first_step_gradients(tmp_path, 0, "whole")
    split, trainer = _first_step_gradients(tmp_path, 2, "split")
    assert trainer.args.per_device_train_batch_size == 2 and trainer.args.gradient_accumulation_steps == 2
    assert whole.keys() == split.keys() and whole
    for name, value in whole.items():
        torch.testing.assert_close(split[name], value, atol=1e-6, rtol=1e-4)


def test_a_micro_batch_that_does_not_divide_the_batch_is_refused(tmp_path):
    from ad.config import make_config
    from ad.errors import UserError
    from tasks.textworld.config import GenerateConfig

    with pytest.raises(UserError, match="--sft-micro-batch-size must divide"):
        make_config(GenerateConfig, {"sft_batch_size": 8, "sft_micro_batch_size": 3})
    model, tokenizer = _tiny(tmp_path)
    with pytest.raises(ValueError, match="must divide"):
        sft_trainer(model, tokenizer, [{"input_ids": [1, 2], "labels": [-100, 2]}], tmp_path / "x", epochs=1.0,
                    lr=1e-3, batch_size=4, lora=LORA, seed=0, progress=False, micro_batch_size=3)
