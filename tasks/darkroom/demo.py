"""``ad demo`` (``--task darkroom``, the default): Algorithm Distillation on DarkRoom end to end.

A2C learning histories on every goal -> AD on subsampled histories of the training goals and the ED baseline ->
both in context on the held-out goals -> report.md (the pipeline: :mod:`ad.demo_pipeline`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ad.config import option
from ad.demo_pipeline import ADDemoConfig
from tasks.darkroom.goals import check_size


@dataclass
class DarkRoomDemoConfig(ADDemoConfig):
    """Algorithm Distillation on DarkRoom end to end (generate -> train AD and ED -> evaluate -> report)."""

    FAMILY = "darkroom"
    TITLE = "DarkRoom"

    size: int = option(9, "DarkRoom side length")
    steps_per_goal: int = option(240_000, "A2C env steps per goal (the fast preset learns every goal in ~50k; "
                                          "longer histories give AD more learning-to-converged windows)")
    generate_preset: str = option("fast", "A2C preset of `ad generate darkroom`")
    ent_coef: float = option(0.05, "entropy bonus of the source A2C (`ad generate ... --ent-coef`, whose own default "
                                   "is 0.01); each demo's default is the value measured best for its task family "
                                   "(BENCHMARKS.md, #17)")
    terminate_on_goal: bool = option(False, "end episodes at the goal (the `ad generate darkroom` default) instead "
                                            "of rewarding every step spent there (the AD paper's Dark Room)")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_size(self.size)

    def family_dropout(self) -> float:
        """0.1 up to 7x7 (18 / 36 training goals: without it AD heads for the training goals on held-out ones), 0
        above (it cost 0.17 at 11x11); measured in BENCHMARKS.md (#17)."""
        return 0.1 if self.size <= 7 else 0.0

    def generate_options(self) -> dict[str, Any]:
        return {"size": self.size, "seed": self.seed, "steps_per_goal": self.steps_per_goal,
                "terminate_on_goal": self.terminate_on_goal, "preset": self.generate_preset,
                "ent_coef": self.ent_coef, "threads": self.threads}
