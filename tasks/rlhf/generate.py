"""``ad generate rlhf``: GRPO toward positive sentiment, every completion logged as a learning history.

Units are chunks of ``chunk_steps`` training iterations (task ``sentiment-c0000``, ``-c0001`` ..., run = seed),
each committed only after the trainer saved its checkpoint, so a re-run resumes from the last committed unit
without losing or duplicating a row (:mod:`tasks.trl_runs`). The run folder (``--run-dir``, else ``<out>/_run``
for a local ``--out``) also holds TensorBoard scalars, reward_curve.png and summary.json.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ad.config import data_options
from ad.lm.pretrained import load_base
from tasks.rlhf.config import GenerateConfig
from tasks.rlhf.evaluate import evaluate_policy
from tasks.rlhf.prompts import load_prompts, split_prompts
from tasks.rlhf.reward import checked_reward, load_reward
from tasks.rlhf.rollouts import SPEC, RolloutLog, chunk_task
from tasks.trl_runs import chunk_tasks
from tasks.trl_runs.checkpoints import load_policy, open_run

#: In a run folder outside the dataset: the --out whose training state the folder holds.


def dataset_metadata(cfg: GenerateConfig, train: list[str], heldout: list[str]) -> dict[str, Any]:
    """Dataset-level metadata: task spec, source algorithm + config, seeds, split and the prompt split."""
    import trl

    tasks = chunk_tasks(cfg, chunk_task)
    source = data_options(cfg)
    return {
        "task_spec": {"kind": "text-rlhf", "reward": cfg.reward, "model": cfg.model,
                      "max_new_tokens": cfg.max_new_tokens, "temperature": cfg.temperature,
                      "template": "rollout", "episode": "one completion (step 0)"},
        "source": {"algorithm": "GRPO", "library": f"trl {trl.__version__}", "config": source},
        "seeds": [cfg.seed],
        "split": {"train": sorted(tasks), "heldout": []},  # held-out *prompts* below; every unit trains
        "prompts": {"train": train, "heldout": heldout},
        "tasks": tasks,
    }


def build_trainer(cfg: GenerateConfig, model: Any, tokenizer: Any, train_prompts: list[str], reward_fn: Any,
                  log: RolloutLog | None, ckpt_dir: Path, callbacks: list[Any]) -> Any:
    """A LoggingGRPOTrainer (or, with ``log=None``, one that logs nothing) set up from ``cfg``."""
    from datasets import Dataset
    from trl import GRPOConfig

    from ad.config.groups import peft_lora_config
    from ad.progress.hf import trainer_progress
    from tasks.rlhf.trainer import LoggingGRPOTrainer
    from tasks.trl_runs import trainer_args

    disable_tqdm, progress_callbacks = trainer_progress(cfg.progress, "GRPO")  # plain lines in a log
    args = GRPOConfig(**trainer_args(cfg, ckpt_dir, disable_tqdm), use_cpu=True)
    peft_config = peft_lora_config(cfg.lora_dict()) if cfg.lora else None
    tokenizer.padding_side = "left"
    return LoggingGRPOTrainer(model=model, reward_funcs=reward_fn, args=args, processing_class=tokenizer,
                              train_dataset=Dataset.from_dict({"prompt": train_prompts}), peft_config=peft_config,
                              callbacks=[*callbacks, *progress_callbacks], rollout_log=log)


def generate(cfg: GenerateConfig) -> dict[str, Any]:
    """Run (or resume) the RLHF run of ``cfg``; returns the summary also written to ``<run>/summary.json``."""
    from ad.progress.hf import library_bars_off_in_logs
    from tasks.rlhf.trainer import TensorBoardCallback
    from tasks.trl_runs.callbacks import ChunkCallback

    library_bars_off_in_logs()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    prompts = load_prompts(cfg.prompts)
    train, heldout = split_prompts(prompts, cfg.heldout_fraction, cfg.seed)
    user_reward = load_reward(cfg.reward)
    model, tokenizer = load_base(cfg.model)

    run = open_run(cfg, SPEC, "rlhf", dataset_metadata(cfg, train, heldout))
    writer, out, run_dir, ckpt_dir, resume, summary = run
    eval_set = heldout[:cfg.eval_prompts]

    if eval_set and "before" not in summary:  # the base policy, once per dataset
        summary["before"] = evaluate_policy(model, tokenizer, eval_set, user_reward, cfg.max_new_tokens,
                                            cfg.temperature, cfg.seed)
        run.save(summary)

    log = RolloutLog(writer, run=cfg.seed, num_generations=cfg.num_generations)
    trainer_ref: dict[str, Any] = {}

    def where() -> str:
        trainer = trainer_ref.get("trainer")
        return f"training iteration {trainer.state.global_step if trainer else '?'}"

    reward_fn = checked_reward(user_reward, cfg.reward, lambda *batch: trainer_ref["trainer"].scored(*batch), where)

    on_commit = log.printer(cfg.progress)
    elapsed = 0.0
    if run.done(cfg.max_steps):
        policy = load_policy(model, resume, cfg.lora)  # everything is committed: the final policy, for evaluation
    else:
        callbacks: list[Any] = [ChunkCallback(log, cfg.chunk_steps, on_commit)]
        if cfg.tensorboard:
            callbacks.append(TensorBoardCallback(str(run_dir / "tb")))
        trainer = build_trainer(cfg, model, tokenizer, train, reward_fn, log, ckpt_dir, callbacks)
        trainer_ref["trainer"] = trainer
        start = time.perf_counter()
        trainer.train(resume_from_checkpoint=resume)
        elapsed = time.perf_counter() - start
        policy = trainer.model
    writer.close()

    if eval_set:
        summary["after"] = evaluate_policy(policy, tokenizer, eval_set, user_reward, cfg.max_new_tokens,
                                           cfg.temperature, cfg.seed)
    summary.update(train_seconds_this_run=elapsed, rows_this_run=log.rows_logged, steps=cfg.max_steps)
    run.save(summary, "RLHF reward per training iteration" if cfg.plots else None)
    if eval_set:
        print(f"held-out mean reward ({len(eval_set)} prompts): before {summary['before']['mean_reward']:+.3f}, "
              f"after {summary['after']['mean_reward']:+.3f}; distinct-word ratio (fluency check) before "
              f"{summary['before']['distinct_words']:.2f}, after {summary['after']['distinct_words']:.2f}")
    print(f"{log.rows_logged} completions logged in {elapsed:.1f}s -> {out}")
    return summary
