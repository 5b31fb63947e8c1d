"""The engine shared by the families whose source is a TRL trainer (RLHF's GRPO, math's RLOO): every sampled
completion logged as a history row, one unit per chunk of training iterations committed right after the trainer
saved that chunk's checkpoint, and resume from the last committed chunk. Not a family: it registers nothing."""
from __future__ import annotations

import math
from typing import Any, Callable


def trainer_args(cfg: Any, ckpt_dir: Any, disable_tqdm: bool) -> dict[str, Any]:
    """The trl trainer config fields both sources set alike: one optimiser step per iteration of
    ``completions_per_step`` completions, plain sampling, no saving or reporting of trl's own."""
    return dict(
        output_dir=str(ckpt_dir), max_steps=cfg.max_steps, learning_rate=cfg.learning_rate, beta=cfg.beta,
        seed=cfg.seed, per_device_train_batch_size=cfg.completions_per_step, gradient_accumulation_steps=1,
        num_generations=cfg.num_generations, max_completion_length=cfg.max_new_tokens, temperature=cfg.temperature,
        top_k=0, top_p=1.0, logging_steps=1, save_strategy="no", report_to="none", bf16=False,
        disable_tqdm=disable_tqdm, dataloader_num_workers=0, log_completions=False, save_only_model=False,
        activation_checkpointing=False,  # trl turns it on to save GPU memory; here it only re-runs every forward
    )


def chunk_tasks(cfg: Any, chunk_task: Callable[[int], str]) -> dict[str, dict[str, Any]]:
    """Task name -> chunk index and [first, last) training iterations of every unit of a ``max_steps`` run."""
    return {chunk_task(k): {"chunk": k, "updates": [k * cfg.chunk_steps, min((k + 1) * cfg.chunk_steps, cfg.max_steps)]}
            for k in range(math.ceil(cfg.max_steps / cfg.chunk_steps))}
