"""What a grid family configures, and what every grid dataset shares (no torch, nothing heavy: ``ad --help`` reads
the options): the sources' shared options and their checks (:class:`GridOptions`, a family's config inherits it and
sets its defaults with :func:`ad.config.override`), :class:`GridFamily` (a family as the grid sources see it),
:func:`register_grid_family`, and a grid dataset's columns (:func:`history_spec`), metadata (:func:`grid_metadata`)
and learning figure (:func:`ratio_summary`).
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

from ad.config import option, override, refuse
from ad.distributed import check_backend_options
from ad.errors import UserError
from ad.config.memory import check_memory
from ad.config.groups import RunOptions, continue_post_init, dataset_out, run_options
from tasks.grid.room import NUM_ACTIONS, ROWS_FIRST_ORDER, split_goals
from tasks.source_options import (ExplorerOptions, NoiseOptions, RandomOptions, check_explorer_options,
                                  check_noise_options, check_random_options)

#: The ``--help`` sections of the A2C options and of how batches run.
A2C_GROUP = "A2C source"
RUNNING_GROUP = "batches and writing"
#: Whether this machine has a second core for background shard encoding (the default of --background-writing).
MULTICORE = (os.cpu_count() or 1) >= 2


@dataclass
class GridOptions(NoiseOptions, RandomOptions, ExplorerOptions,
                  run_options("out", "seed", "threads", "progress", "tensorboard", "plots")):
    """Options every grid family's source shares; declared and checked here once (the room, the A2C, the noise,
    random and explorer sources, the running): a family's config inherits them, adds its own and sets its defaults
    with :func:`ad.config.override` (defaults here are DarkRoom's)."""

    out: str = dataset_out("data/darkroom")
    seed: int = override(RunOptions, "seed", 0, "the agents' initial weights and actions and the train/held-out "
                                                "split; recorded as run")
    size: int = option(9, "grid side; states are cells row*size+col")
    episode_length: int = option(20, "steps per episode (truncation)")
    random_start: bool = option(False, "start each episode in a random cell instead of the centre")
    heldout_fraction: float = option(0.25, "fraction of the tasks held out from training the transformer")
    random_policy: Literal["dirichlet", "uniform"] = override(RandomOptions, "random_policy", "uniform")
    # A2C
    hidden: int = option(128, "width of the shared embedding layer", group=A2C_GROUP)
    num_envs: int = option(10, "parallel envs per task (one history stream each)", group=A2C_GROUP)
    num_steps: int = option(10, "rollout length per update", group=A2C_GROUP)
    learning_rate: float = option(1e-4, "Adam learning rate", aliases=("lr",), group=A2C_GROUP)
    adam_betas: list[float] = option([0.9, 0.999], "Adam betas", group=A2C_GROUP)
    adam_eps: float = option(1e-6, "Adam epsilon", group=A2C_GROUP)
    max_grad_norm: float = option(0.5, "gradient-norm clip, applied to each task's agent separately", group=A2C_GROUP)
    ent_coef: float = option(0.01, "entropy bonus coefficient", group=A2C_GROUP)
    vf_coef: float = option(0.99, "value-loss coefficient", group=A2C_GROUP)
    gamma: float = option(0.99, "discount", group=A2C_GROUP)
    gae_lambda: float = option(1.0, "GAE lambda; 1.0 = plain n-step returns (the recipe's choice)", group=A2C_GROUP)
    # running
    goals_per_batch: int = option(0, "tasks trained together in one batch = one work unit (0 = all tasks with "
                                     "--backend local, 8 per unit with --backend ray); batches commit one by one. "
                                     "A task's history does not depend on it or on the backend", runtime=True,
                                  group=RUNNING_GROUP)
    backend: str = option("local", "where batches run: local (this process) or ray (one Ray task per batch; "
                                   "pip install 'algorithm-distillation[ray]')", runtime=True, group=RUNNING_GROUP)
    address: str = option("", "Ray cluster to join with --backend ray ('auto', 'host:6379', 'ray://host:10001'); "
                              "empty = start a local Ray instance. On several machines --out must be storage "
                              "they all reach (s3://, gs://, a shared file system)", runtime=True,
                          group=RUNNING_GROUP)
    workers: int = option(0, "most batches running at once with --backend ray (0 = one per CPU of the cluster; "
                             "also the CPU count of a local Ray instance)", runtime=True, group=RUNNING_GROUP)
    run_dir: str = option("", "local folder for summary.json, learning curves, GIF and TensorBoard (default: "
                              "<out>/_run for a local --out, runs/generate-<name> for a remote URL)", runtime=True,
                          group=RUNNING_GROUP)
    logprob_bits: int = option(23, "mantissa bits kept in the stored logprobs: 23 = exact float32; 7 = bfloat16 "
                                   "precision, smaller datasets", group=RUNNING_GROUP)
    threads: int = override(RunOptions, "threads", 1, "those of the elementwise work; the A2C's matrix products "
                                                      "always run on one thread, so results do not depend on it")
    background_writing: bool = option(MULTICORE, "encode the history shards on a background thread (at lower "
                                                 "CPU priority) while training goes on; on by default with 2+ "
                                                 "cores (Ray workers always write on their training thread)",
                                      runtime=True, group=RUNNING_GROUP)
    log_every: int = option(500, "updates between TensorBoard / progress-bar statistics", runtime=True,
                            group=RUNNING_GROUP)

    def __post_init__(self) -> None:
        refuse(self, ("goals_per_batch",), lambda v: v < 0, "must be >= 0")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise UserError(f"--heldout-fraction must be in [0, 1) (at least one task must train), got "
                            f"{self.heldout_fraction}")
        check_a2c_options(self)
        check_noise_options(self)
        check_random_options(self)
        check_explorer_options(self)
        continue_post_init(GridOptions, self)


def register_grid_family(name: str, package: str, env_class: str, gym_ids: dict[str, tuple[int, int]],
                         env_kwargs: dict[str, Any], summary: str, generate_config: type, demo_config: type,
                         default: bool = False, posterior: bool = False) -> None:
    """Register a grid family of the package ``package`` (``"tasks.darkroom"``): its gymnasium ids (``gym_ids``: id ->
    (size, max_episode_steps), the first used by ``ad eval``; ``<package>.env:<env_class>`` and
    ``<package>.vector_env:make_vector_env`` built with ``env_kwargs``) and its :class:`ad.families.TaskFamily`
    (``<package>.generate:generate``, optimal actions from ``<package>.optimal``, with ``posterior`` its
    ``posterior_action_probs`` too). Imports no torch."""
    import gymnasium

    from ad.families import TaskFamily, register_family
    from ad.registry import lazy_function

    for gym_id, (size, steps) in gym_ids.items():
        if gym_id not in gymnasium.registry:
            gymnasium.register(id=gym_id, entry_point=f"{package}.env:{env_class}", max_episode_steps=steps,
                               vector_entry_point=f"{package}.vector_env:make_vector_env",
                               kwargs={"size": size, **env_kwargs})
    register_family(TaskFamily(
        name=name, summary=summary, generate_config=generate_config,
        generate=lazy_function(f"{package}.generate:generate"), gym_id=next(iter(gym_ids)),
        eval_kwargs=lazy_function(f"{package}.vector_env:eval_kwargs"), demo_config=demo_config,
        optimal_actions=lazy_function(f"{package}.optimal:optimal_actions"), action_order=ROWS_FIRST_ORDER,
        posterior_action_probs=lazy_function(f"{package}.optimal:posterior_action_probs") if posterior else None,
        task_kwargs=("size",), default=default))


def batch_memory_bytes(size: int, hidden: int, num_envs: int, goals: int) -> int:
    """Rough peak memory of one batch of A2C agents: per goal, parameters + gradient + two Adam moments + the
    pre-ReLU gradient of the (hidden, cells) embedding and heads, and the (actions, cells) policy table."""
    cells, actions = size * size, 5
    per_goal = 5 * (hidden * cells + (actions + 1) * (hidden + 1)) + 3 * actions * cells + 64 * num_envs
    return 4 * goals * per_goal


def check_batches(config: Any, tasks: int, tables: int, noun: str, fewer: str) -> None:
    """UserError where one batch of ``tasks`` agents (``tables`` tables of the room's cells each) would not fit in
    memory, or the backend options are off; ``noun`` names the tasks and ``fewer`` the option that has fewer."""
    per_batch = min(config.goals_per_batch or tasks, tasks)
    check_memory(tables * batch_memory_bytes(config.size, config.hidden, config.num_envs, per_batch),
                 f"--size {config.size} with {per_batch} {noun} per batch",
                 f"pass a smaller --goals-per-batch, fewer {fewer} or a smaller --size")
    check_backend_options(config.backend, config.address, config.workers)


def check_a2c_options(config: Any) -> None:
    """UserError for A2C and running options out of range (shared by every family built on :mod:`tasks.grid.a2c`:
    DarkRoom, Key-to-Door); non-finite values are refused too."""
    refuse(config, ("episode_length", "hidden", "num_envs", "num_steps", "log_every"), lambda v: v <= 0,
           "must be positive")
    if not (0 < config.learning_rate < math.inf and 0 < config.adam_eps < math.inf
            and 0 < config.max_grad_norm < math.inf):
        raise UserError("--learning-rate, --adam-eps and --max-grad-norm must be positive and finite")
    if not (0 <= config.ent_coef < math.inf and 0 <= config.vf_coef < math.inf):
        raise UserError(f"--ent-coef and --vf-coef must be finite and >= 0, got {config.ent_coef} and {config.vf_coef}")
    if len(config.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in config.adam_betas):
        raise UserError(f"--adam-betas needs two values in [0, 1), got {config.adam_betas}")
    if not (0.0 <= config.gamma <= 1.0 and 0.0 <= config.gae_lambda <= 1.0):
        raise UserError("--gamma and --gae-lambda must be in [0, 1]")


#: Fraction of each stream, at its end, over which the learning figure is measured.
FINAL_FRACTION = 0.05
#: A goal counts as learned when its final mean return reaches this fraction of the optimum.
LEARNED_RATIO = 0.9
#: Why a summary's mean ratio is null (summary.json is strict JSON: no NaN).
NO_RATIO = ("no task has a ratio: none finished an episode in the last {:.0%} of its stream, or its optimal return "
            "is 0; raise --steps-per-task or --episode-length")

Goal = tuple[int, ...]
Columns = dict[str, np.ndarray]


@dataclass(frozen=True)
class GridFamily:
    """A grid family as the grid sources see it: one configuration of the engine (DarkRoom's
    :data:`tasks.darkroom.generate.DARKROOM`, Key-to-Door's :data:`tasks.keydoor.generate.KEYDOOR`). Its tasks are
    tuples of ints; its agents see *full states* (Key-to-Door: cell + size^2 * key carried), which ``derive`` maps to
    the stored columns. Every callable is a module-level function (a Ray work unit pickles the family by reference).
    """

    family: str  #: the dataset's family
    title: str  #: the family in pictures ("DarkRoom")
    tasks: Callable[[Any], list[Goal]]  #: the config's tasks, in order
    task_name: Callable[[int, Goal], str]  #: ``(size, task)`` -> the task's (unit's) name
    metadata: Callable[[Any, list[Goal]], dict[str, Any]]  #: the A2C dataset's metadata of the config's tasks
    steps_option: str  #: the config's option with the env steps per task (over its streams)
    make_env: Callable[[Any, list[Goal]], Any]  #: GridVectorEnv over (tasks x cfg.num_envs) observing full states
    tables: int = 1  #: full states per cell (Key-to-Door's 2: key carried or not): each agent has tables*size^2 rows
    extra_columns: dict[str, str] = dataclasses.field(default_factory=dict)  #: stored beside the core columns
    derive: Callable[[Any, Columns], Columns] | None = None  #: full-state columns -> stored columns (None: as is)
    pictures: Callable[..., None] | None = None  #: ``(cfg, run_dir, metadata, greedy)``: pictures beside the curves
    noun: str = "goals"  #: what the family's tasks are called in printed lines ("key/door pairs")

    def num_states(self, cfg: Any) -> int:
        """Full states: the rows of each agent's tables."""
        return self.tables * cfg.size * cfg.size

    def steps(self, cfg: Any) -> int:
        """Env steps per task (over its streams)."""
        return getattr(cfg, self.steps_option)

    def episodes_per_stream(self, cfg: Any) -> int:
        """Episodes of each stream of a source that writes whole episodes (noise, random, explorer): the task's env
        steps over ``num_envs`` streams."""
        return max(1, self.steps(cfg) // (cfg.num_envs * cfg.episode_length))

    def stored(self, cfg: Any, columns: Columns) -> Columns:
        """The columns stored for one unit's full-state ``columns``."""
        return columns if self.derive is None else self.derive(cfg, columns)


def history_spec(cfg: Any, family: GridFamily, critic: bool):
    """A grid dataset's columns (a ``HistorySpec``): the observed cell, the action, a scalar logprob, the critic's
    value (``critic``: the A2C's, whose logprobs keep ``--logprob-bits``) and the family's extra columns."""
    from ad.history import ColumnSpec, HistorySpec

    extra = {"value": "float32"} if critic else {}
    bits = {"logprob_bits": cfg.logprob_bits} if critic else {}
    return HistorySpec(state=ColumnSpec.discrete(cfg.size * cfg.size), action=ColumnSpec.discrete(NUM_ACTIONS),
                       logprob="scalar", extra={**extra, **family.extra_columns}, **bits)


def grid_metadata(cfg: Any, goals: list[Goal], task_name: Callable[[int, Goal], str],
                  describe: Callable[[Goal], dict[str, Any]], optimum: Callable[[Goal], float],
                  task_spec: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """A grid dataset's metadata: ``task_spec``, ``source``, seeds, the seeded split and per task its
    ``describe(goal)`` entries, split and optimal return."""
    train, heldout = split_goals(goals, cfg.heldout_fraction, cfg.seed)
    held = set(heldout)
    tasks = {task_name(cfg.size, g): {**describe(g), "split": "heldout" if g in held else "train",
                                      "optimal_return": optimum(g)} for g in goals}
    return {"task_spec": task_spec, "source": source, "seeds": {"seed": cfg.seed, "run": cfg.seed},
            "split": {"train": [task_name(cfg.size, g) for g in train],
                      "heldout": [task_name(cfg.size, g) for g in heldout]},
            "tasks": tasks}


def finite_or_none(value: float) -> float | None:
    """``value`` as a float, or None where it is NaN / infinite (JSON has no NaN)."""
    return float(value) if np.isfinite(value) else None


def ratio_summary(ratios: dict[str, float | None]) -> dict[str, Any]:
    """The learned counts and mean of per-task final ratios (None: no ratio), as strict JSON: a null mean and a
    note saying why when no task has a ratio, and how many tasks have none."""
    values = np.array([v for v in ratios.values() if v is not None], dtype=np.float64)
    learned = int((values >= LEARNED_RATIO).sum())
    out = {"goals": len(values), "learned_goals": learned, "learned_fraction": learned / max(len(values), 1),
           "mean_final_ratio": float(values.mean()) if len(values) else None,
           "tasks_without_ratio": len(ratios) - len(values)}
    if not len(values):
        out["mean_final_ratio_note"] = NO_RATIO.format(FINAL_FRACTION)
    return out


def ratio_text(value: float | None) -> str:
    """A summary's mean ratio for a progress line: 3 decimals, or why there is none."""
    return f"{value:.3f}" if value is not None else "none: no task finished an episode"
