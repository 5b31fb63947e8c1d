"""Supervised fine-tuning on gold action sequences with trl's ``SFTTrainer`` (LoRA), loss on the command tokens.

The demonstrations go to trl pre-tokenized (``input_ids`` + ``labels`` with -100 on the prompt) by the acting
scorer's encoders (:mod:`tasks.textworld.scoring`), so SFT maximises exactly the score the policy acts on.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from tasks.textworld.rollouts import Episode
from ad.errors import UserError
from tasks.textworld.scoring import encode_commands, encode_prompts
from tasks.textworld.transcript import encode_transcript


def sft_rows(tokenizer: Any, demos: Sequence[Episode], max_prompt_tokens: int, transcript: bool = False
             ) -> list[dict[str, list[int]]]:
    """Pre-tokenized examples (``input_ids``, ``labels`` -100 outside the commands): one per demonstrated move, or with
    ``transcript`` one per game (:func:`tasks.textworld.transcript.encode_transcript`)."""
    if transcript:
        return [transcript_row(tokenizer, ep, max_prompt_tokens) for ep in demos if len(ep)]
    prompts = encode_prompts(tokenizer, [p for ep in demos for p in ep.prompts], max_prompt_tokens)
    commands = encode_commands(tokenizer, [a for ep in demos for a in ep.actions])
    return [{"input_ids": p + c, "labels": [-100] * len(p) + c} for p, c in zip(prompts, commands)]


def transcript_row(tokenizer: Any, demo: Episode, max_tokens: int) -> dict[str, list[int]]:
    """One game as one SFT example: its transcript through the last command, the commands' tokens labelled."""
    ids, spans = encode_transcript(tokenizer, demo.prompts, demo.actions)
    if len(ids) > max_tokens:
        raise UserError(f"the transcript of {demo.name} is {len(ids)} tokens, over --max-prompt-tokens "
                        f"{max_tokens}: raise it (within the model's context)")
    labels = [-100] * len(ids)
    for start, end in spans:
        labels[start:end] = ids[start:end]
    return {"input_ids": ids, "labels": labels}


def sft_trainer(model: Any, tokenizer: Any, rows: Sequence[dict[str, list[int]]], out_dir: Path, *, epochs: float,
                lr: float, batch_size: int, lora: dict | None, seed: int, progress: bool = True,
                command_loss: bool = True, activation_checkpointing: bool = False, micro_batch_size: int = 0,
                callbacks: Sequence[Any] = ()) -> Any:
    """trl's SFTTrainer on pre-tokenized rows (:func:`sft_rows`), the loss read on the command tokens only
    (:class:`tasks.textworld.command_loss.CommandLossSFTTrainer`; ``command_loss=False`` is trl's own), activations kept
    unless ``activation_checkpointing``. ``micro_batch_size`` (a divisor of ``batch_size``; 0 = the whole batch)
    accumulates each optimiser step over micro-batches (the same gradient); ``callbacks`` are extra TrainerCallbacks."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from ad.progress.hf import trainer_progress
    from ad.config.groups import peft_lora_config
    from tasks.textworld.command_loss import CommandLossSFTTrainer

    micro = micro_batch_size or batch_size
    if micro < 1 or batch_size % micro:
        raise ValueError(f"the SFT micro-batch ({micro}) must divide the batch ({batch_size})")
    disable_tqdm, progress_callbacks = trainer_progress(progress, "SFT")
    args = SFTConfig(output_dir=str(out_dir), num_train_epochs=epochs, learning_rate=lr,
                     per_device_train_batch_size=micro, gradient_accumulation_steps=batch_size // micro,
                     lr_scheduler_type="cosine",
                     warmup_steps=0, logging_steps=10, save_strategy="no", report_to=[], seed=seed,
                     use_cpu=not torch.cuda.is_available(),  # train where generate put the weights
                     max_length=max(len(r["input_ids"]) for r in rows), disable_tqdm=disable_tqdm,
                     dataloader_num_workers=0, activation_checkpointing=activation_checkpointing)
    trainer_cls = CommandLossSFTTrainer if command_loss else SFTTrainer
    return trainer_cls(model=model, args=args, train_dataset=Dataset.from_list(list(rows)), processing_class=tokenizer,
                       peft_config=peft_lora_config(lora) if lora else None,
                       callbacks=list(progress_callbacks or []) + list(callbacks))


def train_sft(model: Any, tokenizer: Any, demos: Sequence[Episode], out_dir: Path, *, epochs: float, lr: float,
              batch_size: int, max_prompt_tokens: int, lora: dict | None, seed: int, progress: bool = True,
              micro_batch_size: int = 0, callbacks: Sequence[Any] = (), transcript: bool = False) -> Any:
    """Fine-tune ``model`` on the demonstrations (one row per move, or per game with ``transcript``); returns the
    trained model (a peft model with ``lora``)."""
    rows = sft_rows(tokenizer, demos, max_prompt_tokens, transcript)
    trainer = sft_trainer(model, tokenizer, rows, out_dir, epochs=epochs,
                          lr=lr, batch_size=batch_size, lora=lora, seed=seed, progress=progress,
                          micro_batch_size=micro_batch_size, callbacks=callbacks)
    trainer.train()
    return trainer.model
