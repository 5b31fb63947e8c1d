"""The text the policy sees: an instruction, optional few-shot worked examples, the problem: a chat template rendered
with the generation prompt where the tokenizer has one (few-shot examples as earlier turns), else plain
``Question: ...\\nAnswer:`` text. Either way a string, so the history stores exactly what the policy saw.
"""
from __future__ import annotations

from typing import Any, Sequence

from ad.errors import UserError
from tasks.math.problems import Problem

INSTRUCTION = ("Solve the math word problem. Think step by step in a few short sentences, then give the final "
               "answer on the last line as '#### <number>'.")


def render_prompt(tokenizer: Any, question: str, shots: Sequence[Problem] = ()) -> str:
    """The prompt for ``question``: the instruction, the worked ``shots``, then the question."""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "system", "content": INSTRUCTION}]
        for shot in shots:
            messages += [{"role": "user", "content": shot.question}, {"role": "assistant", "content": shot.solution}]
        messages.append({"role": "user", "content": question})
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    head = INSTRUCTION + "\n\n" + "".join(f"Question: {s.question}\nAnswer: {s.solution}\n\n" for s in shots)
    return f"{head}Question: {question}\nAnswer:"


#: No token covers more characters than this: a longer question is known not to fit without tokenizing it.
MAX_CHARS_PER_TOKEN = 256


def check_prompt_lengths(problems: Sequence[Problem], tokenizer: Any, shots: Sequence[Problem], limit: int | None,
                         max_new_tokens: int, source: str) -> None:
    """UserError naming the first problem whose prompt plus ``max_new_tokens`` does not fit the model's ``limit``
    positions, before any prompt is built for training; ``source`` names where the problems came from."""
    if not limit:
        return
    overhead = len(tokenizer(render_prompt(tokenizer, "", shots))["input_ids"])
    room = limit - max_new_tokens - overhead
    advice = "pass fewer --few-shot or a smaller --max-new-tokens"
    if room <= 0:
        raise UserError(f"the model attends over {limit} positions, but the instruction and {len(shots)} few-shot "
                        f"examples take {overhead} and --max-new-tokens {max_new_tokens} more; {advice}")
    for problem in problems:
        chars = len(problem.question)
        tokens = None if chars > room * MAX_CHARS_PER_TOKEN else \
            len(tokenizer(problem.question, add_special_tokens=False)["input_ids"])
        if tokens is None or tokens > room:
            size = f"{chars:,} characters" + (f", {tokens:,} tokens" if tokens is not None else "")
            raise UserError(f"{source}: problem {problem.id} ({size}; it starts {problem.question[:40]!r}) does not "
                            f"fit the model's {limit} positions with the instruction and few-shot examples "
                            f"({overhead} tokens) and --max-new-tokens {max_new_tokens}: questions may take "
                            f"{room:,} tokens; shorten or remove it, or {advice}")
