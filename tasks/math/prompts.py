"""The text the policy sees: an instruction, optional few-shot worked examples, the problem.

With a tokenizer that has a chat template (SmolLM2-Instruct does) the prompt is that template rendered with the
generation prompt, few-shot examples as earlier user / assistant turns; without one (the tiny test models) it is
plain ``Question: ...\\nAnswer:`` text. Either way the prompt is a string, so the history stores exactly the text
the policy was conditioned on.
"""
from __future__ import annotations

from typing import Any, Sequence

from tasks.math.problems import Problem

INSTRUCTION = ("Solve the math word problem. Think step by step in a few short sentences, then give the final "
               "answer on the last line as '#### <number>'.")
#: Multi-step mode: one reasoning step per turn.
STEP_INSTRUCTION = ("Solve the math word problem one step at a time: write only the next step (one short sentence "
                    "with one calculation). When you know the final answer, write '#### <number>'.")


def _has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_prompt(tokenizer: Any, question: str, shots: Sequence[Problem] = (), instruction: str = INSTRUCTION,
                  steps: Sequence[str] = ()) -> str:
    """The prompt for ``question``: ``instruction``, the worked ``shots``, the question, and (multi-step mode) the
    reasoning ``steps`` written so far, each on its own line."""
    so_far = "".join(f"\n{s}" for s in steps)
    if _has_chat_template(tokenizer):
        messages = [{"role": "system", "content": instruction}]
        for shot in shots:
            messages += [{"role": "user", "content": shot.question}, {"role": "assistant", "content": shot.solution}]
        messages.append({"role": "user", "content": question})
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text + so_far.lstrip("\n")
    head = instruction + "\n\n" + "".join(f"Question: {s.question}\nAnswer: {s.solution}\n\n" for s in shots)
    return f"{head}Question: {question}\nAnswer:{so_far}"
