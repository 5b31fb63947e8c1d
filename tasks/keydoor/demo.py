"""``ad demo --task keydoor``: Algorithm Distillation on Dark Key-to-Door end to end (:mod:`ad.demo`), from the AD
paper's A2C histories (the default) or the nearest-unvisited explorer's. Options left at 0 (``--steps-per-task``,
``--subsample``) take the source's default (:data:`SOURCE_DEFAULTS`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ad.config import option, override, refuse
from ad.demo import ADDemoConfig
from ad.errors import UserError
from tasks.grid.family import GridOptions
from tasks.keydoor.config import GenerateConfig

#: Per source: env steps per task (over its 10 streams; the explorer's scale with --episode-length) and subsample:
#: the A2C's 240 episodes a stream, every 40th in AD's windows; the explorer's 60 (it has found the key and the door
#: by its fourth episode in 98% of its streams), all of them.
SOURCE_DEFAULTS = {"a2c": {"steps_per_task": 120_000, "subsample": 40},
                   "explorer": {"episodes_per_stream": 60, "subsample": 1}}
#: Histories (streams) per task of the demo's sources (`ad generate keydoor --num-envs`).
STREAMS = GenerateConfig.num_envs


@dataclass
class KeyDoorDemoConfig(ADDemoConfig):
    """Algorithm Distillation on Dark Key-to-Door (generate -> train AD and ED -> evaluate -> report)."""

    FAMILY: ClassVar[str] = "keydoor"
    TITLE: ClassVar[str] = "Dark Key-to-Door"
    REPORT_WINDOWS: ClassVar[tuple[tuple[int, int], ...]] = ((36, 40), (46, 50))  # 46-50: the figure its docs quote

    out: str = override(ADDemoConfig, "out", "data/demo-keydoor")
    tasks: int = option(960, "key/door pairs the source runs on, drawn by --seed from the 6480 of a 9x9 room (a "
                             "held-out fraction is never distilled)")
    source: Literal["a2c", "explorer"] = option(
        "a2c", "source algorithm whose histories AD distils: a2c (one A2C agent per pair, the AD paper's source) or "
               "explorer (walks to the nearest cell it has not searched until it finds the key, then the same for "
               "the door)")
    steps_per_task: int = option(0, "source env steps per task, over its 10 streams (the last episodes of each stream "
                                    "are ED's data); 0 = the source's default (a2c 120,000; explorer 60 episodes a "
                                    "stream, 30,000 with 50-step episodes)")
    ent_coef: float = override(GridOptions, "ent_coef", 0.01)
    heldout_fraction: float = option(0.1, "fraction of the pairs held out for the in-context evaluation")
    subsample: int = override(ADDemoConfig, "subsample", 0, "0 = the source's default (a2c 40, explorer 1)")
    context: int = override(ADDemoConfig, "context", 200)
    batch_size: int = option(16, "windows per optimiser step of AD and ED")
    ad_steps: int = override(ADDemoConfig, "ad_steps", 6000)
    ed_steps: int = override(ADDemoConfig, "ed_steps", 600)
    episodes: int = override(ADDemoConfig, "episodes", 50)
    episode_length: int = override(GridOptions, "episode_length", GenerateConfig.episode_length,
                                   "in the histories and in the evaluation; an episode also ends at the door. 50 is "
                                   "the AD paper's Key-to-Door")

    def __post_init__(self) -> None:
        refuse(self, ("steps_per_task", "subsample"), lambda v: v < 0, "must be >= 0 (0: the source's default)")
        defaults = dict(SOURCE_DEFAULTS.get(self.source, SOURCE_DEFAULTS["a2c"]))
        if "episodes_per_stream" in defaults:
            defaults["steps_per_task"] = defaults.pop("episodes_per_stream") * STREAMS * max(self.episode_length, 1)
        for name, value in defaults.items():
            if getattr(self, name) == 0:
                setattr(self, name, value)
        super().__post_init__()
        if self.tasks < 0 or self.batch_size <= 0 or self.episode_length <= 0:
            raise UserError("--tasks must be >= 0, --batch-size and --episode-length positive")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise UserError(f"--heldout-fraction must be in (0, 1) (the evaluation needs held-out pairs and "
                            f"training needs the rest), got {self.heldout_fraction}")

    def generate_options(self) -> dict[str, Any]:
        """Options of ``ad generate keydoor``."""
        options = {"tasks": self.tasks, "steps_per_task": self.steps_per_task, "seed": self.seed,
                   "ent_coef": self.ent_coef, "heldout_fraction": self.heldout_fraction,
                   "episode_length": self.episode_length, "threads": self.threads}
        return options if self.source == "a2c" else {**options, "source": self.source}

    def transition_context_options(self) -> dict[str, Any]:
        """Refused: a Key-to-Door state includes whether the key is carried, and a single step from a drawn cell
        starts without it, so DPT would never see the states after the key."""
        raise UserError("--dpt-data transitions: a Key-to-Door state includes whether the key is carried, which "
                        "single steps from uniformly drawn cells never start with; use --dpt-data random (random "
                        "histories, which pick the key up) or source")

    def train_options(self) -> dict[str, Any]:
        """The pipeline's ``ad train rl`` options plus the batch size."""
        return {**super().train_options(), "batch_size": self.batch_size}
