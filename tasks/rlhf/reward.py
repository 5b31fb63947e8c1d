"""Reward functions (trl's signature) and the guard that refuses bad rewards before they reach the history."""
from __future__ import annotations

import importlib
import math
from typing import Any, Callable

from ad.errors import UserError

RewardFn = Callable[..., list[float]]
_VADER: Any = None


def vader(prompts: list[str] | None = None, completions: list[str] | None = None, **kwargs: Any) -> list[float]:
    """VADER compound sentiment of each completion, in [-1, 1] (positive = positive sentiment)."""
    global _VADER
    if _VADER is None:
        try:
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
        except ImportError:
            raise UserError("the vader reward needs the vaderSentiment package: pip install vaderSentiment") from None
        _VADER = SentimentIntensityAnalyzer()
    return [float(_VADER.polarity_scores(text)["compound"]) for text in completions or []]


def load_reward(name: str) -> RewardFn:
    """'vader' or 'module:function' -> the function (UserError if it cannot be found)."""
    if name == "vader":
        return vader
    if ":" not in name:
        raise UserError(f"--reward {name!r} is neither 'vader' nor 'module:function'")
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UserError(f"--reward {name!r}: cannot import module {module_name!r} ({err})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise UserError(f"--reward {name!r}: module {module_name!r} has no function {attr!r}")
    return fn


def checked_reward(fn: RewardFn, name: str, on_scored: Callable[..., None], where: Callable[[], str]) -> RewardFn:
    """Wrap ``fn`` so that a raise, a wrong count, or a non-finite / non-number value stops the run with a clear
    UserError (nothing of the unfinished unit is written), and every scored batch is passed to ``on_scored(prompts,
    completions, rewards, completion_ids)`` (the token ids trl passes to reward functions, or None)."""

    def reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        try:
            values = fn(prompts=prompts, completions=completions, **kwargs)
        except UserError:
            raise
        except Exception as err:  # a user's function: report which one and where, then stop
            raise UserError(f"reward function {name!r} raised {type(err).__name__}: {err} ({where()}); "
                            "fix it and re-run the same command to resume from the last committed unit") from None
        values = list(values) if values is not None else []
        if len(values) != len(completions):
            raise UserError(f"reward function {name!r} returned {len(values)} values for {len(completions)} "
                            f"completions ({where()}); it must return one float per completion")
        for i, v in enumerate(values):
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
            if not ok:
                raise UserError(f"reward function {name!r} returned {v!r} for completion {i} ({where()}): "
                                f"{completions[i][:60]!r}; every reward must be a finite number")
        values = [float(v) for v in values]
        ids = kwargs.get("completion_ids")
        on_scored(list(prompts), list(completions), values, None if ids is None else [list(c) for c in ids])
        return values

    reward.__name__ = name.replace(":", ".").split(".")[-1]
    return reward
