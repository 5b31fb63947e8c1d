"""Playing many CookingWorld games in one batch with a :class:`~tasks.textworld.policy.TextWorldPolicy`, and
replaying gold action sequences (the SFT demonstrations) through the same env and prompts; every move is one row
of an :class:`Episode`, what the history store logs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from tasks.textworld.env import CookingWorldEnv
from tasks.textworld.games import GameOptions, game_name
from tasks.textworld.prompts import build_prompt

#: One game to play: (fold, TextWorldExpress seed of that fold).
Game = tuple[str, int]


@dataclass
class Episode:
    """One game played to the end (success, failure or the step limit)."""

    fold: str
    seed: int
    name: str
    prompts: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminated: list[bool] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)
    logprobs: list[list[float]] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    prompt_ids: list[list[int]] = field(default_factory=list)
    command_ids: list[list[int]] = field(default_factory=list)
    valid_actions: list[list[str]] = field(default_factory=list)  #: per move, the commands the game accepted
    indices: list[int] = field(default_factory=list)  #: per played move, the command's index among them
    candidate_scores: list[list[float]] = field(default_factory=list)  #: per played move, every one's score
    candidate_ids: list[list[list[int]]] = field(default_factory=list)  #: per played move, every one's tokens
    score: float = 0.0  #: final normalised score (0..1)
    success: bool = False
    context_full: bool = False  #: ended (truncated) because the next move no longer fitted the policy's context

    def end(self) -> str:
        """How the game ended: "success", "failed" (the game ended it otherwise), "context" (the transcript filled
        the policy's context) or "limit" (the step limit)."""
        if self.success:
            return "success"
        if self.terminated and self.terminated[-1]:
            return "failed"
        return "context" if self.context_full else "limit"

    def __len__(self) -> int:
        return len(self.actions)

    def record(self, prompt: str, action: str, valid: Sequence[str], step: tuple, logprobs: list[float],
               value: float) -> None:
        """Log one move: its prompt, the command played among ``valid`` and the env's ``step`` result after it."""
        _, reward, terminated, truncated, info = step
        self.prompts.append(prompt)
        self.actions.append(action)
        self.valid_actions.append(list(valid))
        self.rewards.append(float(reward))
        self.terminated.append(bool(terminated))
        self.truncated.append(bool(truncated))
        self.logprobs.append(logprobs)
        self.values.append(value)
        self.score, self.success = float(info["score"]), bool(info["success"])


def make_envs(options: GameOptions, games: Sequence[Game]) -> list[CookingWorldEnv]:
    """One env (game handle on the shared JVM) per game."""
    return [CookingWorldEnv(**options.game_dict(), fold=fold) for fold, _ in games]


def play(policy: Any, games: Sequence[Game], options: GameOptions, history: int, greedy: bool = True,
         temperature: float = 1.0, generator: Any = None, on_move: Callable[[int], None] | None = None,
         pinned: Sequence[str] = ()) -> list[Episode]:
    """Play every game once, all active games advancing together (one batched scoring pass per move); prompts
    as :func:`tasks.textworld.prompts.build_prompt` builds them with ``history`` and ``pinned``."""
    envs = make_envs(options, games)
    episodes = [Episode(fold, int(seed), game_name(options.game, fold, seed)) for fold, seed in games]
    observations: list[list[str]] = []
    valid: list[list[str]] = []
    for env, (_, seed) in zip(envs, games):
        obs, info = env.reset(options={"game_seed": int(seed)})
        observations.append([obs])
        valid.append(info["valid_actions"])
    active = list(range(len(games)))
    policy.begin()
    while active:
        prompts = [build_prompt(observations[i], episodes[i].actions, history, pinned) for i in active]
        fits = policy.fits(prompts, [valid[i] for i in active], keys=active)
        for i, fit in zip(active, fits):
            if not fit and episodes[i].actions:  # the context is full: the game ends here, truncated
                episodes[i].truncated[-1], episodes[i].context_full = True, True
        if not all(fits):
            keep = [k for k, (i, fit) in enumerate(zip(active, fits)) if fit or not episodes[i].actions]
            active, prompts = [active[k] for k in keep], [prompts[k] for k in keep]
            if not active:
                break
        choices = policy.act(prompts, [valid[i] for i in active], greedy=greedy, temperature=temperature,
                             generator=generator, keys=active)
        still = []
        for i, prompt, choice in zip(active, prompts, choices):
            step = obs, _, terminated, truncated, info = envs[i].step(choice.action)
            ep = episodes[i]
            ep.record(prompt, choice.action, valid[i], step, choice.token_logprobs, choice.value)
            ep.prompt_ids.append(choice.prompt_ids)
            ep.command_ids.append(choice.command_ids)
            ep.indices.append(choice.index)
            ep.candidate_scores.append(choice.scores)
            ep.candidate_ids.append(choice.candidate_ids)
            observations[i].append(obs)
            valid[i] = info["valid_actions"]
            if not (terminated or truncated):
                still.append(i)
        if on_move is not None:
            on_move(len(active))
        active = still
    return episodes


def gold_demonstrations(games: Sequence[Game], options: GameOptions, history: int,
                        pinned: Sequence[str] = ()) -> list[Episode]:
    """Replay each game's gold action sequence; prompts built as when acting (log-probabilities left empty)."""
    episodes = []
    for (fold, seed), env in zip(games, make_envs(options, games)):
        obs, info = env.reset(options={"game_seed": int(seed), "gold": True})
        ep = Episode(fold, int(seed), game_name(options.game, fold, seed))
        observations = [obs]
        for action in env.gold_actions():
            prompt, valid = build_prompt(observations, ep.actions, history, pinned), info["valid_actions"]
            step = obs, _, terminated, truncated, info = env.step(action)
            ep.record(prompt, action, valid, step, [], float("nan"))
            observations.append(obs)
            if terminated or truncated:
                break
        episodes.append(ep)
    return episodes


def fold_games(options: GameOptions, fold: str, count: int, seed: int, salt: int = 0) -> list[Game]:
    """``count`` distinct games of ``fold`` drawn with (seed, salt): the seed picks the held-out / training games."""
    seeds = CookingWorldEnv(**options.game_dict(), fold=fold).fold_seeds
    rng = np.random.default_rng([seed, salt, {"train": 0, "dev": 1, "test": 2}[fold]])
    return [(fold, int(s)) for s in rng.choice(seeds, size=min(count, len(seeds)), replace=False)]


def summary(episodes: Sequence[Episode]) -> dict[str, float]:
    """Success rate, mean normalised score and mean moves of a set of episodes."""
    if not episodes:
        return {"games": 0, "success": float("nan"), "score": float("nan"), "moves": float("nan")}
    ends = [e.end() for e in episodes]
    return {"games": len(episodes), "success": float(np.mean([e.success for e in episodes])),
            "score": float(np.mean([e.score for e in episodes])), "moves": float(np.mean([len(e) for e in episodes])),
            **{f"ended_{end}": ends.count(end) for end in ("success", "failed", "limit", "context")}}
