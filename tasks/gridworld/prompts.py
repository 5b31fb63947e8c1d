"""The actor's prompt (strategy + info + state, as in LactChain) and the text of a move list."""
from __future__ import annotations

from typing import Sequence

from tasks.gridworld.env import MOVES, info_text, state_text

STRATEGY = ("You are in a grid world. Propose a list of moves that reaches the goal. 'left' and 'right' turn 90 "
            "degrees in place; 'forward' moves one cell the way you face. Never step off the grid.")


def make_prompt(size: int, config: Sequence[int], style: str = "absolute") -> str:
    """The actor's prompt for one state (state text in ``style``); the completion (a move list) follows ``Moves:``."""
    return (f"{STRATEGY}\n{info_text(size)} (x and y run from 0 to {size - 1}; north is +y, east is +x).\n"
            f"{state_text(config, style)}\nMoves:")


def moves_text(moves: Sequence[int]) -> str:
    """Completion text of a move list: ``" forward, left"`` (the env parses it back with parse_moves)."""
    return " " + ", ".join(MOVES[m] for m in moves)
