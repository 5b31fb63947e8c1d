"""The acting policy: an LM that scores the valid commands of many games at once, plus an optional value head.

``act`` scores every valid command of every game in one batched, cached pass
(:func:`tasks.textworld.scoring.score_candidates`), then picks the best (greedy) or samples from the scores
renormalised over the valid commands (``temperature``), so it never issues an invalid command. It returns what the
history store logs: the chosen command, its per-token log-probabilities and the value estimate of the prompt.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from tasks.textworld.scoring import score_candidates


@dataclass
class Choice:
    """One game's move as chosen by :meth:`TextWorldPolicy.act`."""

    action: str  #: the command
    index: int  #: its index in the valid list
    token_logprobs: list[float]  #: per-token log-probabilities of the command after the prompt
    value: float  #: value head's estimate at the prompt (NaN without a value head)
    prompt_ids: list[int]  #: the prompt tokens the model saw
    command_ids: list[int]  #: the command's tokens


class TextWorldPolicy:
    """Scores valid commands with ``model`` (a causal LM, maybe peft-wrapped) and picks one per game."""

    def __init__(self, model: Any, tokenizer: Any, value_head: torch.nn.Module | None = None,
                 max_prompt_tokens: int = 640, batch: int = 64):
        self.model, self.tokenizer, self.value_head = model, tokenizer, value_head
        self.max_prompt_tokens, self.batch = int(max_prompt_tokens), int(batch)

    @torch.no_grad()
    def act(self, prompts: Sequence[str], valid: Sequence[Sequence[str]], greedy: bool = True,
            temperature: float = 1.0, generator: torch.Generator | None = None) -> list[Choice]:
        """One command per game; games are scored ``batch`` at a time."""
        was_training = self.model.training
        self.model.eval()
        choices: list[Choice] = []
        for start in range(0, len(prompts), self.batch):
            part = slice(start, start + self.batch)
            scored = score_candidates(self.model, self.tokenizer, prompts[part], valid[part], self.max_prompt_tokens)
            values = (self.value_head(scored.hidden.float()).squeeze(-1).tolist() if self.value_head is not None
                      else [float("nan")] * len(scored.scores))  # (B,)
            for b, scores in enumerate(scored.scores):
                if greedy:
                    index = int(scores.argmax())
                else:
                    probs = torch.softmax(scores.double() / temperature, -1)  # (A,) over the valid commands
                    index = int(torch.multinomial(probs, 1, generator=generator))
                choices.append(Choice(valid[start + b][index], index, scored.token_logprobs[b][index].tolist(),
                                      float(values[b]), scored.prompt_ids[b], scored.command_ids[b][index]))
        self.model.train(was_training)
        return choices
