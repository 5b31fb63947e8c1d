"""TextWorldExpress CookingWorld as a Gymnasium env (``ad/CookingWorld-v0``).

Observation: the seed 002 step message (task, what the game says, inventory). Action: a command;
``info["valid_actions"]`` lists the commands the game accepts now. Reward: the change of the game's normalised
score (0..1); ``terminated`` on success or failure, ``truncated`` at ``step_limit`` moves. A reset plays
``options={"game_seed": s}`` (a seed of the env's fold), else a fold seed drawn with the env's RNG. Games of one
process share one JVM (:func:`tasks.textworld.server.shared_server`).
"""
from __future__ import annotations

import string
from typing import Any

import gymnasium
import numpy as np
import orjson

from ad.errors import UserError
from tasks.textworld.games import FOLDS, GameOptions, game_name
from tasks.textworld.server import GameServer, server_errors, shared_server

#: Characters of observations and commands (TextWorldExpress writes ASCII).
CHARSET = string.printable
MAX_TEXT = 8192
#: (game, gameParams, fold) -> the fold's seeds (the same in every JVM: the jar's fixed split)
_FOLD_SEEDS: dict[tuple[str, str, str], np.ndarray] = {}


def step_text(task: str, observation: str, inventory: str) -> str:
    """The observation text of one move: task, game output, inventory (seed 002's step message + inventory)."""
    return f"# TASK: {task.strip()}\nObs: {observation.strip()}\n{inventory.strip()}"


class CookingWorldEnv(gymnasium.Env):
    """One CookingWorld game at a time, on the process's shared game server."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, game: str = "cookingworld", num_locations: int = 3, include_doors: bool = True,
                 num_distractors: int = 2, num_ingredients: int = 2, step_limit: int = 16, fold: str = "train",
                 render_mode: str | None = None, server: GameServer | None = None):
        self.options = GameOptions(game=game, num_locations=num_locations, include_doors=include_doors,
                                   num_distractors=num_distractors, num_ingredients=num_ingredients,
                                   step_limit=step_limit)  # validates
        if fold not in FOLDS:
            raise UserError(f"unknown fold {fold!r}; use one of {', '.join(FOLDS)}")
        self.fold, self.render_mode = fold, render_mode
        self.observation_space = gymnasium.spaces.Text(MAX_TEXT, min_length=0, charset=CHARSET)
        self.action_space = gymnasium.spaces.Text(128, min_length=1, charset=CHARSET)
        self._server = server or shared_server()
        self._game = self._server.new_game()
        with server_errors("loading the game"):
            msg = self._game.load(game, self.options.game_params())
        if msg:
            raise UserError(f"TextWorldExpress rejected the game parameters: {msg}")
        self._seeds_key = (game, self.options.game_params(), fold)
        self.game_seed: int | None = None
        self.task = ""
        self.moves = 0
        self.score = 0.0
        self._last: dict[str, Any] = {}

    @property
    def fold_seeds(self) -> np.ndarray:
        """TextWorldExpress seeds of the env's fold (read from the jar once per game settings and fold: py4j
        fetches a Java list element by element)."""
        if self._seeds_key not in _FOLD_SEEDS:
            with server_errors("listing the fold's games"):
                getter = {"train": self._game.getSeedsTrain, "dev": self._game.getSeedsDev,
                          "test": self._game.getSeedsTest}[self.fold]
                _FOLD_SEEDS[self._seeds_key] = np.asarray(list(getter()), dtype=np.int64)
        return _FOLD_SEEDS[self._seeds_key]

    @property
    def name(self) -> str:
        """Task name of the current game (``cookingworld-train-00042``)."""
        return game_name(self.options.game, self.fold, int(self.game_seed or 0))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "game_seed" in options:
            self.game_seed = int(options["game_seed"])
        else:
            self.game_seed = int(self.fold_seeds[self.np_random.integers(len(self.fold_seeds))])
        gold = bool(options.get("gold", False))
        with server_errors("starting a game"):
            info = orjson.loads(self._game.generateNewGameJSON(self.game_seed, self.fold, gold))
            self.task = str(self._game.getTaskDescription())
        self.moves, self.score = 0, float(info["score"])
        self._last = info
        return step_text(self.task, info["observation"], info["inventory"]), self._info(info)

    def step(self, action: str):
        if self.game_seed is None:
            raise RuntimeError("call reset() before step()")
        with server_errors("taking a move"):
            info = orjson.loads(self._game.stepJSON(str(action)))
        self.moves += 1
        score = float(info["score"])
        reward = score - self.score
        self.score = score
        terminated = bool(info["tasksuccess"] or info["taskfailure"])
        truncated = not terminated and self.moves >= self.options.step_limit
        self._last = info
        return (step_text(self.task, info["observation"], info["inventory"]), float(reward), terminated, truncated,
                self._info(info))

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        return {"valid_actions": list(info["validActions"]), "score": float(info["score"]),
                "success": bool(info["tasksuccess"]), "failure": bool(info["taskfailure"]),
                "game_seed": self.game_seed, "moves": self.moves}

    def gold_actions(self) -> list[str]:
        """The gold action sequence of the current game (reset with ``options={"gold": True}`` first)."""
        with server_errors("reading the gold path"):
            return [str(a) for a in self._game.getGoldActionSequence()]

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return step_text(self.task, self._last.get("observation", ""), self._last.get("inventory", ""))
        return None
