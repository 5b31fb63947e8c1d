"""Game options (typed, shared by the env and ``ad generate textworld``), game ids and the fold split: a game is
named by its fold and seed (``cookingworld-train-00042``); the train fold is trained on, the test fold held out.
Importing this module imports no torch and starts no JVM.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ad.config import option, refuse
from ad.errors import UserError
from ad.config.groups import continue_post_init

#: TextWorldExpress's games (textworld_express.constants.GAME_NAMES); this family's options are CookingWorld's.
GAME_NAMES = ("cookingworld",)
#: Folds of TextWorldExpress's seed split.
FOLDS = ("train", "dev", "test")


@dataclass
class GameOptions:
    """CookingWorld generation parameters (TextWorldExpress ``gameParams``) and the step limit; seed 002's
    defaults."""

    game: str = option("cookingworld", "TextWorldExpress game (this family: cookingworld)")
    num_locations: int = option(3, "rooms in the map (CookingWorld: 1..11)")
    include_doors: bool = option(True, "closed doors between rooms (opening them costs moves)")
    num_distractors: int = option(2, "distractor items that are not in the recipe (0..10)")
    num_ingredients: int = option(2, "ingredients in the recipe (1..5)")
    step_limit: int = option(16, "moves per game before it is truncated (16 cuts most gold paths short with the "
                                 "default game parameters; 32 fits them all)")

    def __post_init__(self) -> None:
        if self.game not in GAME_NAMES:
            raise UserError(f"unknown game {self.game!r}; this family plays: {', '.join(GAME_NAMES)}")
        refuse(self, ("num_locations",), lambda v: not 1 <= v <= 11, "must be in 1..11")
        refuse(self, ("num_distractors",), lambda v: not 0 <= v <= 10, "must be in 0..10")
        refuse(self, ("num_ingredients",), lambda v: not 1 <= v <= 5, "must be in 1..5")
        refuse(self, ("step_limit",), lambda v: v < 1, "must be at least 1")
        continue_post_init(GameOptions, self)

    def game_params(self) -> str:
        """TextWorldExpress's ``gameParams`` string."""
        return game_params(self.num_locations, self.include_doors, self.num_distractors, self.num_ingredients)

    def game_dict(self) -> dict:
        """The options as env keyword arguments."""
        return {"game": self.game, "num_locations": self.num_locations, "include_doors": self.include_doors,
                "num_distractors": self.num_distractors, "num_ingredients": self.num_ingredients,
                "step_limit": self.step_limit}


def game_params(num_locations: int, include_doors: bool, num_distractors: int, num_ingredients: int) -> str:
    """``numLocations=3,includeDoors=1,...`` as TextWorldExpress's ``load`` takes it."""
    return (f"numLocations={int(num_locations)},includeDoors={int(bool(include_doors))},"
            f"numDistractorItems={int(num_distractors)},numIngredients={int(num_ingredients)}")


def game_name(game: str, fold: str, seed: int) -> str:
    """Task name of one game: ``cookingworld-test-20005``."""
    return f"{game}-{fold}-{int(seed):05d}"


Fold = Literal["train", "dev", "test"]
