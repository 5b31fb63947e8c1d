"""Held-out accuracy of a policy: one greedy solution per problem, answer-format failures counted apart."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from tasks.math.answers import parse_answer
from tasks.math.problems import Problem


@torch.no_grad()
def greedy_solutions(model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int, batch_size: int = 32,
                     on_batch: Callable[[int], None] | None = None) -> list[str]:
    """One greedy solution per prompt, batches of ``batch_size`` through the batched sampler (the tokens
    ``model.generate`` picks greedily; a row stops at its own EOS); ``on_batch(n)`` after each batch of n."""
    from tasks.lm_sampling import sample_groups
    from tasks.math.reinforce import eos_ids

    eos = eos_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out: list[str] = []
    for start in range(0, len(prompts), batch_size):
        ids = [tokenizer(p)["input_ids"] for p in prompts[start:start + batch_size]]
        samples = sample_groups(model, ids, 1, max_new_tokens, eos_ids=eos, pad_id=pad, greedy=True)
        out += tokenizer.batch_decode(samples.tokens, skip_special_tokens=True)
        if on_batch is not None:
            on_batch(len(ids))
    return out


def accuracy(problems: Sequence[Problem], solutions: Sequence[str]) -> dict[str, Any]:
    """Fractions of correct final answers, wrong numbers and format failures (no number at all), plus the share
    of answers marked as final (``####`` / boxed / "answer is") and a few samples."""
    parsed = [parse_answer(s) for s in solutions]
    n = max(len(problems), 1)
    correct = sum(a.value == p.answer for a, p in zip(parsed, problems))
    no_number = sum(a.value is None for a in parsed)
    return {"problems": len(problems), "accuracy": correct / n, "wrong": (len(problems) - correct - no_number) / n,
            "format_failures": no_number / n, "marked": sum(a.marked for a in parsed) / n,
            "samples": [{"id": p.id, "question": p.question, "answer": str(p.answer), "solution": s}
                        for p, s in list(zip(problems, solutions))[:5]]}


def evaluate_policy(model: Any, tokenizer: Any, problems: Sequence[Problem], prompts: Sequence[str],
                    max_new_tokens: int, label: str = "eval", progress: bool = True) -> dict[str, Any]:
    """Greedy held-out accuracy of ``model`` on ``problems`` (``prompts``: their rendered prompts)."""
    from ad.progress import Progress

    with Progress(len(prompts), desc=label, unit="problem", show=progress) as bar:
        solutions = greedy_solutions(model, tokenizer, prompts, max_new_tokens, on_batch=bar.update)
    return accuracy(problems, solutions)
