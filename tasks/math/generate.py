"""``ad generate math``: REINFORCE (trl's RLOO) with a KL to a refreshed reference on word problems, every sampled
solution logged as a learning history.

Units are chunks of ``chunk_steps`` training iterations (task ``math-c0000``, ``-c0001`` ..., run = seed), with the
RLHF task's resume rule (:mod:`tasks.trl_runs`). ``<run>/`` also holds summary.json (held-out greedy accuracy before
/ after) and reward_curve.png.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ad.config import data_options
from ad.lm.pretrained import load_base, position_limit
from tasks.math.answers import format_number, score
from tasks.math.config import GenerateConfig
from tasks.math.problems import Problem, generate_problems, load_jsonl, split_problems, split_templates
from tasks.math.prompts import check_prompt_lengths, render_prompt
from tasks.math.rollouts import SPEC, MathRolloutLog, chunk_task
from tasks.trl_runs import chunk_tasks

#: Generated held-out problems start at this index (training problems use indices below it).
HELDOUT_OFFSET = 100_000
#: Few-shot examples use indices from here (never a training or held-out problem).
SHOT_OFFSET = 200_000


def load_split(cfg: GenerateConfig) -> dict[str, Any]:
    """Training problems, held-out problems, few-shot examples and a description of the split."""
    if cfg.problems:
        train, heldout = split_problems(load_jsonl(cfg.problems), cfg.seed, cfg.heldout_fraction)
        return {"train": train, "heldout": heldout, "shots": train[:cfg.few_shot],
                "split": {"source": cfg.problems, "train": [p.id for p in train], "heldout": [p.id for p in heldout]}}
    train_t, held_t = split_templates(cfg.seed, cfg.heldout_fraction)
    return {"train": generate_problems(train_t, cfg.level, cfg.train_problems),
            "heldout": generate_problems(held_t, cfg.level, max(cfg.eval_problems, 1), offset=HELDOUT_OFFSET),
            "shots": generate_problems(train_t, cfg.level, cfg.few_shot, offset=SHOT_OFFSET),
            "split": {"source": "generated", "level": cfg.level, "train_templates": train_t,
                      "heldout_templates": held_t}}


def dataset_metadata(cfg: GenerateConfig, split: dict[str, Any], shots: list[Problem]) -> dict[str, Any]:
    """Dataset-level metadata: task spec, source algorithm + config, seeds, the split."""
    import trl

    tasks = chunk_tasks(cfg, chunk_task)
    source = data_options(cfg)
    return {
        "task_spec": {"kind": "text-math", "model": cfg.model, "max_new_tokens": cfg.max_new_tokens,
                      "temperature": cfg.temperature, "template": "rollout", "episode": "one solution (step 0)",
                      "reward": f"1 if the final answer is right, + {cfg.format_reward} if marked as final",
                      "few_shot": [p.id for p in shots]},
        "source": {"algorithm": "REINFORCE (RLOO leave-one-out baseline) + KL to a reference refreshed every "
                                f"{cfg.refresh_every or 'never (k = infinity)'} iterations",
                   "library": f"trl {trl.__version__}", "config": source},
        "seeds": [cfg.seed],
        "split": {"train": sorted(tasks), "heldout": []},  # held-out *problems* below; every unit trains
        "problems": split["split"],
        "tasks": tasks,
    }


def reward_function(trainer_ref: dict[str, Any], format_reward: float) -> Any:
    """The reward function handed to trl (correct final answer = 1, + ``format_reward`` if marked), which also
    passes every scored batch to the trainer's log."""

    def correctness(prompts: list[str], completions: list[str], completion_ids: list[list[int]],
                    answer: list[str], question: list[str], problem_id: list[str], **_: Any) -> list[float]:
        from fractions import Fraction

        rewards = [score(c, Fraction(a), format_reward) for c, a in zip(completions, answer)]
        trainer_ref["trainer"].ad_scored(list(prompts), list(completions), [list(c) for c in completion_ids],
                                         rewards, {"question": list(question), "problem_id": list(problem_id),
                                                   "answer": list(answer)})
        return rewards

    return correctness


def build_trainer(cfg: GenerateConfig, model: Any, tokenizer: Any, train: list[dict[str, str]], reward_fn: Any,
                  on_batch: Any, ckpt_dir: Path, callbacks: list[Any]) -> Any:
    """A LoggingRLOOTrainer set up from ``cfg`` (``on_batch=None``: one that logs nothing), with the LoRA
    reference refresh callback when it applies."""
    from datasets import Dataset
    from trl import RLOOConfig

    from ad.progress.hf import trainer_progress
    from tasks.math.trainer import LoggingRLOOTrainer, RefreshReference
    from tasks.trl_runs import trainer_args

    disable_tqdm, progress_callbacks = trainer_progress(cfg.progress, "RLOO")
    k = cfg.refresh_every
    args = RLOOConfig(**trainer_args(cfg, ckpt_dir, disable_tqdm), use_cpu=not torch.cuda.is_available(),
                      gradient_checkpointing=False, sync_ref_model=bool(k) and not cfg.lora,
                      ref_model_sync_steps=k or 1, ref_model_mixup_alpha=1.0)
    if cfg.lora:
        from peft import get_peft_model

        from ad.config.groups import peft_lora_config

        model = get_peft_model(model, peft_lora_config(cfg.lora_dict()))  # trl then keeps a "ref" adapter copy
    tokenizer.padding_side = "left"
    trainer = LoggingRLOOTrainer(model=model, reward_funcs=reward_fn, args=args, processing_class=tokenizer,
                                 train_dataset=Dataset.from_list(train), callbacks=[*callbacks, *progress_callbacks],
                                 on_batch=on_batch)
    if cfg.lora and k and cfg.beta > 0:
        trainer.add_callback(RefreshReference(trainer.model, k))
    return trainer


def training_rows(cfg: GenerateConfig, tokenizer: Any, problems: list[Problem], shots: list[Problem]
                  ) -> list[dict[str, str]]:
    """trl dataset rows: the rendered prompt and the columns the reward function and the log need."""
    return [{"prompt": render_prompt(tokenizer, p.question, shots), "question": p.question, "problem_id": p.id,
             "answer": format_number(p.answer)} for p in problems]


def generate(cfg: GenerateConfig) -> dict[str, Any]:
    """Run (or resume) the math run of ``cfg``; returns the summary also written to ``<run>/summary.json``."""
    from ad.progress.hf import library_bars_off_in_logs
    from tasks.math.evaluate import evaluate_policy
    from tasks.trl_runs.callbacks import ChunkCallback
    from tasks.trl_runs.checkpoints import load_policy, open_run

    library_bars_off_in_logs()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    split = load_split(cfg)  # bad problem files fail here, before anything is written
    model, tokenizer = load_base(cfg.model, cfg.dtype)
    check_prompt_lengths(split["train"] + split["heldout"], tokenizer, split["shots"], position_limit(model),
                         cfg.max_new_tokens, f"--problems {cfg.problems}" if cfg.problems else "a generated problem")
    if torch.cuda.is_available():
        model = model.cuda()
    shots = split["shots"]
    run = open_run(cfg, SPEC, "math", dataset_metadata(cfg, split, shots))
    writer, out, run_dir, ckpt_dir, resume, summary = run
    heldout = split["heldout"][:cfg.eval_problems]
    heldout_prompts = [render_prompt(tokenizer, p.question, shots) for p in heldout]

    if heldout and "before" not in summary:  # the base policy, once per dataset
        summary["before"] = evaluate_policy(model, tokenizer, heldout, heldout_prompts, cfg.max_new_tokens,
                                            "held-out before", cfg.progress)
        run.save(summary)

    eos = {int(t) for t in ([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])}
    if cfg.engine == "fast":  # it stops at every EOS token of the model's generation config too
        from tasks.math.reinforce import eos_ids

        eos = eos_ids(model, tokenizer)
    log = MathRolloutLog(writer, run=cfg.seed, num_generations=cfg.num_generations, eos_ids=eos)
    trainer_ref: dict[str, Any] = {}
    on_commit = log.printer(cfg.progress)
    elapsed = 0.0
    if run.done(cfg.max_steps):
        policy = load_policy(model, resume, cfg.lora)  # everything is committed: the final policy, for evaluation
    elif cfg.engine == "fast":
        from tasks.math import reinforce

        start = time.perf_counter()
        policy, timings = reinforce.train(cfg, model, tokenizer, split["train"], shots, log, ckpt_dir, resume,
                                          on_commit)
        elapsed = time.perf_counter() - start
        summary["phase_seconds"] = {k: round(sum(v), 2) for k, v in timings.items()}
        summary["dtype"] = cfg.dtype
    else:
        train = training_rows(cfg, tokenizer, split["train"], shots)
        trainer = build_trainer(cfg, model, tokenizer, train, reward_function(trainer_ref, cfg.format_reward),
                                log.add, ckpt_dir, [ChunkCallback(log, cfg.chunk_steps, on_commit)])
        trainer_ref["trainer"] = trainer
        start = time.perf_counter()
        trainer.train(resume_from_checkpoint=resume)
        elapsed = time.perf_counter() - start
        trainer.ad_passes.detach()
        policy = trainer.model
    writer.close()

    if heldout:
        summary["after"] = evaluate_policy(policy, tokenizer, heldout, heldout_prompts, cfg.max_new_tokens,
                                           "held-out after", cfg.progress)
    summary.update(train_seconds_this_run=elapsed, rows_this_run=log.rows_logged, iterations=cfg.max_steps,
                   refresh_every=cfg.refresh_every, level=cfg.level if not cfg.problems else None)
    run.save(summary, "math reward per training iteration" if cfg.plots else None)
    if heldout:
        b, a = summary["before"], summary["after"]
        print(f"held-out greedy accuracy ({len(heldout)} problems): before {b['accuracy']:.3f}, after "
              f"{a['accuracy']:.3f} (format failures {b['format_failures']:.3f} -> {a['format_failures']:.3f})")
    print(f"{log.rows_logged} solutions logged in {elapsed:.1f}s -> {out}")
    return summary
