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

Only the newest ``history`` earlier moves are shown in full; a ``Moves so far:`` line lists every earlier command.
``pinned`` commands (e.g. ``read cookbook``: the recipe) keep their newest result in view on a line
``Result of 'read cookbook' (step 2): ...`` once their move has left the history (docs/experiments/textworld.md).
Everything above the first ``# STEP`` line is the prompt's *head* (:func:`split_head`), which a prompt cut to the
token budget keeps whole (:func:`tasks.textworld.scoring.encode_prompts`).
"""
from __future__ import annotations

from typing import Sequence

INSTRUCTION = "Choose exactly one valid action."


def split_step_text(text: str) -> tuple[str, str]:
    """(task line, the rest) of an env observation (:func:`tasks.textworld.env.step_text`)."""
    head, _, body = text.partition("\n")
    return head, body


def observation_only(step_text: str) -> str:
    """The game's output of a step text, without its task line and inventory."""
    _, body = split_step_text(step_text)
    return body.split("\nInventory", 1)[0].removeprefix("Obs: ").strip()


def split_head(prompt: str) -> tuple[str, str]:
    """(head, steps) of a :func:`build_prompt` prompt, ``head + steps == prompt``: the head (task line, instruction,
    ``Moves so far``, pinned results) ends before the first ``# STEP`` line; a prompt without one is all head."""
    at = prompt.find("\n# STEP ")
    return (prompt, "") if at < 0 else (prompt[:at + 1], prompt[at + 1:])


def build_prompt(observations: Sequence[str], actions: Sequence[str], history: int,
                 pinned: Sequence[str] = ()) -> str:
    """Prompt for the newest observation: ``observations`` has one more entry than ``actions`` (the moves made);
    the newest result of each ``pinned`` command stays once its move has left the shown history."""
    if len(observations) != len(actions) + 1:
        raise ValueError(f"need one more observation than actions, got {len(observations)} and {len(actions)}")
    task, _ = split_step_text(observations[0])
    step = len(actions)
    start = max(0, step - history)
    lines = [task, INSTRUCTION]
    if start > 0:
        lines.append("Moves so far: " + "; ".join(actions[:start]))
    for command in pinned:  # the result of move k is shown in full at step k + 1 when k + 1 >= start
        done = [k for k in range(step) if actions[k] == command]
        if done and done[-1] + 1 < start:
            lines.append(f"Result of '{command}' (step {done[-1]}): {observation_only(observations[done[-1] + 1])}")
    for k in range(start, step):
        lines += [f"# STEP {k}", split_step_text(observations[k])[1], f"Action: {actions[k]}"]
    lines += [f"# STEP {step}", split_step_text(observations[step])[1], "Action:"]
    return "\n".join(lines)
