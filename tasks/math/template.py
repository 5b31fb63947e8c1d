"""Language format of math histories: ``problem: ...\\nsolution: ...\\nreward: 1\\n###``, parsed back."""
from __future__ import annotations

import re
from typing import Any

from ad.formats.language import Template, _fmt_reward


class MathTemplate(Template):
    """One sampled solution per block; the solution is the action (the text the LM learns to write)."""

    name = "math"
    _block = re.compile(r"problem: (.*?)\nsolution: (.*?)\nreward: (-?[\d.eE+-]+)\n###\n?", re.S)

    def row_segments(self, row: dict[str, Any]) -> list[tuple[str, bool]]:
        return [(f"problem: {row['state']}\nsolution: ", False), (str(row["action"]), True),
                (f"\nreward: {_fmt_reward(row['reward'])}\n###\n", False)]

    def parse(self, text: str) -> list[dict[str, Any]]:
        return [{"state": p, "action": s, "reward": float(r)} for p, s, r in self._block.findall(text)]

    def parse_action(self, text: str) -> str:
        end = text.find("\nreward:")
        return text if end < 0 else text[:end]
