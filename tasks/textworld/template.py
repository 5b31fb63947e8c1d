"""The Language-format template of TextWorld histories (``textworld``): the prompt the policy saw, the command,
the reward::

    <prompt, ending in "Action:"> take knife
    Reward: 0.1429
    ###

A row renders as exactly the text the policy scored (the state column holds the whole prompt).
"""
from __future__ import annotations

import re
from typing import Any

from ad.formats.language import Segment, Template


class TextWorldTemplate(Template):
    """Prompt, `` command``, ``Reward: r``, ``###`` (one block per move)."""

    name = "textworld"
    _block = re.compile(r"(.*?Action:) (.*?)\nReward: (-?[\d.eE+-]+|nan)\n###\n", re.S)

    def row_segments(self, row: dict[str, Any]) -> list[Segment]:
        return [(str(row["state"]), False), (self.action_text(row["action"]), True),
                (f"\nReward: {float(row['reward']):.4f}\n###\n", False)]

    def action_text(self, action: Any) -> str:
        return f" {action}"

    def parse(self, text: str) -> list[dict[str, Any]]:
        return [{"state": s, "action": a, "reward": float(r)} for s, a, r in self._block.findall(text)]

    def parse_action(self, text: str) -> str:
        """The command at the start of generated text (up to the end of its line)."""
        command = text.split("\n", 1)[0].strip()
        if not command:
            raise ValueError(f"no command at the start of {text[:20]!r}")
        return command
