"""The prompt the policy scores commands after (seed 002's, with a bounded history).

    # TASK: You are hungry! ...
    Choose exactly one valid action.
    # STEP 0
    Obs: You are in the kitchen. ...
    Inventory ...
    Action: look around
    # STEP 1
    Obs: ...
    Action:

Only the newest ``history`` earlier moves are shown in full (seed 002 kept 11; each costs ~60-150 tokens); a
``Moves so far:`` line lists every earlier command (a few tokens each) so the policy knows where it is in the
recipe even when their observations are cut. The task line always stays.
"""
from __future__ import annotations

from typing import Sequence

INSTRUCTION = "Choose exactly one valid action."


def split_step_text(text: str) -> tuple[str, str]:
    """(task line, the rest) of an env observation (:func:`tasks.textworld.env.step_text`)."""
    head, _, body = text.partition("\n")
    return head, body


def build_prompt(observations: Sequence[str], actions: Sequence[str], history: int) -> str:
    """Prompt for the newest observation: ``observations`` has one more entry than ``actions`` (the moves made)."""
    if len(observations) != len(actions) + 1:
        raise ValueError(f"need one more observation than actions, got {len(observations)} and {len(actions)}")
    task, _ = split_step_text(observations[0])
    step = len(actions)
    start = max(0, step - history)
    lines = [task, INSTRUCTION]
    if start > 0:
        lines.append("Moves so far: " + "; ".join(actions[:start]))
    for k in range(start, step):
        lines += [f"# STEP {k}", split_step_text(observations[k])[1], f"Action: {actions[k]}"]
    lines += [f"# STEP {step}", split_step_text(observations[step])[1], "Action:"]
    return "\n".join(lines)
