"""A Gymnasium env of math word problems: the observation is the problem (text), the action the model's answer.

Single-step (default): one action = a whole solution; reward 1 if its final answer is right (parsed as in
:mod:`tasks.math.answers`), plus ``format_reward`` if the answer is marked as final; the episode terminates.

Multi-step (``multi_step=True``, the seed's stepwise policy): one action = one reasoning step; the observation is
the problem followed by the steps so far, one per line. The episode terminates with the reward above when a step
marks a final answer (``#### n``, ``\\boxed{n}``, "answer is n") and is truncated with reward 0 after
``max_steps`` steps without one.
"""
from __future__ import annotations

import string
from typing import Any, Sequence

import gymnasium as gym

from tasks.math.answers import parse_answer, score
from tasks.math.problems import LEVELS, TEMPLATE_NAMES, Problem, make_problem

#: Characters of observations and actions (printable ASCII; other characters are dropped from an observation).
CHARSET = string.printable
MAX_TEXT = 4096


class MathEnv(gym.Env):
    """Word problems drawn from ``problems`` (a list, cycled at random) or generated from ``templates`` at
    ``level``. ``reset(options={"problem": Problem})`` poses a given problem."""

    metadata = {"render_modes": []}

    def __init__(self, problems: Sequence[Problem] | None = None, level: int = 1,
                 templates: Sequence[str] = TEMPLATE_NAMES, multi_step: bool = False, max_steps: int = 8,
                 format_reward: float = 0.0) -> None:
        if level not in LEVELS:
            raise ValueError(f"unknown difficulty level {level}; levels are {LEVELS}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be positive, got {max_steps}")
        self.problems = list(problems) if problems else None
        self.level, self.templates = level, list(templates)
        self.multi_step, self.max_steps, self.format_reward = multi_step, max_steps, format_reward
        self.observation_space = gym.spaces.Text(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        self.action_space = gym.spaces.Text(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        self.problem: Problem | None = None
        self.steps: list[str] = []

    def _observation(self) -> str:
        assert self.problem is not None
        text = "\n".join([self.problem.question, *self.steps])
        return "".join(ch for ch in text if ch in CHARSET)[:MAX_TEXT]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        if options and options.get("problem") is not None:
            self.problem = options["problem"]
        elif self.problems:
            self.problem = self.problems[int(self.np_random.integers(len(self.problems)))]
        else:
            template = self.templates[int(self.np_random.integers(len(self.templates)))]
            self.problem = make_problem(template, self.level, int(self.np_random.integers(100_000)))
        self.steps = []
        return self._observation(), {"problem_id": self.problem.id}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.problem is None:
            raise RuntimeError("call reset() before step()")
        action = str(action)
        info: dict[str, Any] = {"problem_id": self.problem.id, "answer": str(self.problem.answer)}
        if not self.multi_step:
            parsed = parse_answer(action)
            info.update(parsed=parsed.value, correct=parsed.value == self.problem.answer)
            return self._observation(), score(action, self.problem.answer, self.format_reward), True, False, info
        self.steps.append(action.strip())
        parsed = parse_answer(action)
        if parsed.marked:
            info.update(parsed=parsed.value, correct=parsed.value == self.problem.answer)
            return self._observation(), score(action, self.problem.answer, self.format_reward), True, False, info
        truncated = len(self.steps) >= self.max_steps
        info.update(parsed=None, correct=False)
        return self._observation(), 0.0, False, truncated, info
