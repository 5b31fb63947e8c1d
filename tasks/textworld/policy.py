"""The acting policy: an LM that scores the valid commands of many games at once, plus an optional value head.

``act`` scores every valid command of every game in one batched, cached pass
(:func:`tasks.textworld.scoring.score_candidates`), then picks the best (greedy) or samples from the scores
renormalised over the valid commands (``temperature``). With ``transcript=True`` each game's keys and values stay
cached between moves (:class:`tasks.textworld.transcript.TranscriptScorer`): call :meth:`TextWorldPolicy.begin`
before a new set of games and pass each game's ``key`` to ``act``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from tasks.textworld.scoring import Scored, score_candidates
from tasks.textworld.transcript import TranscriptScorer


@dataclass
class Choice:
    """One game's move as chosen by :meth:`TextWorldPolicy.act`."""

    action: str  #: the command
    index: int  #: its index in the valid list
    token_logprobs: list[float]  #: per-token log-probabilities of the command after the prompt
    value: float  #: value head's estimate at the prompt (NaN without a value head)
    prompt_ids: list[int]  #: the prompt tokens the model saw
    command_ids: list[int]  #: the command's tokens
    scores: list[float]  #: every valid command's score (summed token log-probabilities), in the valid list's order
    candidate_ids: list[list[int]]  #: every valid command's tokens (PPO rescores them: ``--ppo-ratio``)


class TextWorldPolicy:
    """Scores valid commands with ``model`` (a causal LM, maybe peft-wrapped) and picks one per game."""

    def __init__(self, model: Any, tokenizer: Any, value_head: torch.nn.Module | None = None,
                 max_prompt_tokens: int = 640, batch: int = 64, transcript: bool = False):
        self.model, self.tokenizer, self.value_head = model, tokenizer, value_head
        self.max_prompt_tokens, self.batch = int(max_prompt_tokens), int(batch)
        self.transcript = TranscriptScorer(model, tokenizer, max_prompt_tokens) if transcript else None

    def begin(self) -> None:
        """Before a new set of games: forget the cached transcripts (nothing to do for windowed prompts)."""
        if self.transcript is not None:
            self.transcript.reset()

    def fits(self, prompts: Sequence[str], valid: Sequence[Sequence[str]], keys: Sequence[Any] | None = None
             ) -> list[bool]:
        """Whether each game's next move fits the context: always with windowed prompts (cut to the budget);
        with transcripts, whether the cached transcript plus the new tokens and the longest command stay within
        ``max_prompt_tokens`` (a game that does not fit ends there, truncated)."""
        if self.transcript is None:
            return [True] * len(prompts)
        if keys is None:
            raise ValueError("a transcript policy needs each game's key")
        return self.transcript.fits(keys, prompts, valid)

    def _score(self, prompts: Sequence[str], valid: Sequence[Sequence[str]], keys: Sequence[Any] | None,
               part: slice) -> Scored:
        if self.transcript is None:
            return score_candidates(self.model, self.tokenizer, prompts[part], valid[part], self.max_prompt_tokens)
        if keys is None:
            raise ValueError("a transcript policy needs each game's key")
        return self.transcript.score(keys, prompts, valid)  # every game in one batch: one cache

    @torch.no_grad()
    def act(self, prompts: Sequence[str], valid: Sequence[Sequence[str]], greedy: bool = True,
            temperature: float = 1.0, generator: torch.Generator | None = None,
            keys: Sequence[Any] | None = None) -> list[Choice]:
        """One command per game, ``batch`` games scored at a time (transcripts: all at once, ``keys`` naming games)."""
        was_training = self.model.training
        self.model.eval()
        choices: list[Choice] = []
        step = self.batch if self.transcript is None else max(1, len(prompts))
        for start in range(0, len(prompts), step):
            part = slice(start, start + step)
            scored = self._score(prompts, valid, keys, part)
            values = (self.value_head(scored.hidden.float()).squeeze(-1).tolist() if self.value_head is not None
                      else [float("nan")] * len(scored.scores))  # (B,)
            for b, scores in enumerate(scored.scores):
                if greedy:
                    index = int(scores.argmax())
                else:
                    probs = torch.softmax(scores.double() / temperature, -1)  # (A,) over the valid commands
                    index = int(torch.multinomial(probs, 1, generator=generator))
                choices.append(Choice(valid[start + b][index], index, scored.token_logprobs[b][index].tolist(),
                                      float(values[b]), scored.prompt_ids[b], scored.command_ids[b][index],
                                      scores.tolist(), scored.command_ids[b]))
        self.model.train(was_training)
        return choices
