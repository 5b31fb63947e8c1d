"""``ad demo --task keydoor``: Algorithm Distillation on Dark Key-to-Door end to end (:mod:`ad.demo`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ad.config import option, override
from ad.demo import ADDemoConfig
from ad.errors import UserError
from tasks.grid.family import GridOptions
from tasks.keydoor.config import GenerateConfig


@dataclass
class KeyDoorDemoConfig(ADDemoConfig):
    """Algorithm Distillation on Dark Key-to-Door (generate -> train AD and ED -> evaluate -> report)."""

    FAMILY: ClassVar[str] = "keydoor"
    TITLE: ClassVar[str] = "Dark Key-to-Door"
    REPORT_WINDOWS: ClassVar[tuple[tuple[int, int], ...]] = ((36, 40), (46, 50))  # 46-50: the figure its docs quote

    out: str = override(ADDemoConfig, "out", "data/demo-keydoor")
    tasks: int = option(960, "key/door pairs the A2C source trains on, drawn by --seed from the 6480 of a 9x9 room "
                             "(a held-out fraction is never distilled)")
    steps_per_task: int = option(120_000, "A2C env steps per task, over its 10 streams (the converged tail of each "
                                          "stream is ED's data)")
    ent_coef: float = override(GridOptions, "ent_coef", 0.01)
    heldout_fraction: float = option(0.1, "fraction of the pairs held out for the in-context evaluation")
    subsample: int = override(ADDemoConfig, "subsample", 40)
    context: int = override(ADDemoConfig, "context", 200)
    batch_size: int = option(16, "windows per optimiser step of AD and ED")
    ad_steps: int = override(ADDemoConfig, "ad_steps", 6000)
    ed_steps: int = override(ADDemoConfig, "ed_steps", 600)
    episodes: int = override(ADDemoConfig, "episodes", 50)
    episode_length: int = override(GridOptions, "episode_length", GenerateConfig.episode_length,
                                   "in the histories and in the evaluation; an episode also ends at the door. 50 is "
                                   "the AD paper's Key-to-Door")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.tasks < 0 or self.steps_per_task <= 0 or self.batch_size <= 0 or self.episode_length <= 0:
            raise UserError("--tasks must be >= 0, --steps-per-task, --batch-size and --episode-length positive")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise UserError(f"--heldout-fraction must be in (0, 1) (the evaluation needs held-out pairs and "
                            f"training needs the rest), got {self.heldout_fraction}")

    def generate_options(self) -> dict[str, Any]:
        """Options of ``ad generate keydoor``."""
        return {"tasks": self.tasks, "steps_per_task": self.steps_per_task, "seed": self.seed,
                "ent_coef": self.ent_coef, "heldout_fraction": self.heldout_fraction,
                "episode_length": self.episode_length, "threads": self.threads}

    def transition_context_options(self) -> dict[str, Any]:
        """Refused: a Key-to-Door state includes whether the key is carried, and a single step from a drawn cell
        starts without it, so DPT would never see the states after the key."""
        raise UserError("--dpt-data transitions: a Key-to-Door state includes whether the key is carried, which "
                        "single steps from uniformly drawn cells never start with; use --dpt-data random (random "
                        "histories, which pick the key up) or source")

    def train_options(self) -> dict[str, Any]:
        """The pipeline's ``ad train rl`` options plus the batch size."""
        return {**super().train_options(), "batch_size": self.batch_size}
