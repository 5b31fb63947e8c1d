"""Meta-World ML1 through its public API: skills, the 50 + 50 goal split, task names, scripted experts.

A *skill* is one Meta-World V3 environment (``reach-v3``, ``push-v3``, ``pick-place-v3`` ...). ML1 for a skill
(``metaworld.ML1(skill, seed)``) draws 50 training and 50 test goal positions with the seed; a *task* here is one of
them, named ``mw-<skill>-<split>-g<index>`` (``mw-reach-v3-test-g07`` = ``ML1(...).test_tasks[7]``), so the train /
held-out split of a dataset is Meta-World's own.

The goal is hidden from the observation as ML1 hides it (the last three entries are zeros). The scripted expert of a
skill (``metaworld.policies.ENV_POLICY_MAP``) reads the goal from those entries, so the env runs each task with the
goal observable (the same task with ``partially_observable=False``, see :func:`observable_task`) and hides it in what
it returns; the expert alone is given the full observation.

Every Meta-World or MuJoCo failure a user can meet (not installed, a library that fails to load, a model that fails
to compile) becomes one :class:`~ad.errors.UserError` here.
"""
from __future__ import annotations

import functools
import importlib
import pickle
import re
from typing import Any

from ad.errors import UserError

SPLITS = ("train", "test")
#: Goals per split of ML1 (Meta-World draws 50 training and 50 test goal positions per skill).
GOALS_PER_SPLIT = 50
#: Steps of Meta-World's own episodes (``max_path_length``); an env may not step past it without a reset.
MAX_EPISODE_STEPS = 500
_TASK = re.compile(r"^mw-(?P<skill>[a-z0-9-]+-v\d+)-(?P<split>train|test)-g(?P<goal>\d+)$")
_INSTALL = "install Meta-World and MuJoCo with `pip install 'metaworld>=3.1.1,<3.2' 'mujoco>=3.3,<3.4'`"


def metaworld() -> Any:
    """The ``metaworld`` package (imports MuJoCo); a UserError saying how to install it when it cannot load."""
    try:
        return importlib.import_module("metaworld")
    except Exception as err:  # ImportError, OSError of a shared library, a GL backend that fails ...
        raise UserError(f"Meta-World / MuJoCo failed to load ({type(err).__name__}: {' '.join(str(err).split())}); "
                        f"{_INSTALL}") from None


def skills() -> list[str]:
    """Every ML1 skill (Meta-World's V3 environment names), sorted."""
    return sorted(metaworld().ML1.ENV_NAMES)


def expert_skills() -> list[str]:
    """The skills with a scripted expert policy in ``metaworld.policies``, sorted."""
    metaworld()
    policies = importlib.import_module("metaworld.policies")
    return sorted(set(policies.ENV_POLICY_MAP) & set(skills()))


def check_skill(skill: str, need_expert: bool = False, option: str = "--skill") -> str:
    """``skill`` if Meta-World has it (and a scripted expert for it, with ``need_expert``), else a UserError
    listing the ones it has."""
    known = skills()
    if skill not in known:
        raise UserError(f"{option} {skill!r} is not a Meta-World ML1 skill; use one of: {', '.join(known)}")
    if need_expert and skill not in expert_skills():
        raise UserError(f"{option} {skill!r} has no scripted expert policy in metaworld.policies, so the noise "
                        f"source cannot run on it; skills with one: {', '.join(expert_skills())}")
    return skill


@functools.lru_cache(maxsize=8)
def benchmark(skill: str, seed: int) -> Any:
    """``metaworld.ML1(skill, seed)``: the skill's env class and its 50 train + 50 test goals (built once per
    process; building draws 100 goals by resetting an env, about two seconds)."""
    mw = metaworld()
    check_skill(skill)
    try:
        return mw.ML1(skill, seed=int(seed))
    except Exception as err:
        raise UserError(f"Meta-World could not build ML1 {skill} ({type(err).__name__}: "
                        f"{' '.join(str(err).split())}); {_INSTALL}") from None


def check_goal(index: int, split: str, option: str = "--heldout-goals") -> int:
    """``index`` if it names one of ML1's goals of ``split`` (0..49), else a UserError."""
    if not 0 <= int(index) < GOALS_PER_SPLIT:
        raise UserError(f"{option}: goal index {index} is out of range; ML1 has {GOALS_PER_SPLIT} {split} goals, "
                        f"0..{GOALS_PER_SPLIT - 1}")
    return int(index)


def ml1_task(skill: str, split: str, goal: int, seed: int) -> Any:
    """The ``metaworld.Task`` of one goal: ``ML1(skill, seed).train_tasks[goal]`` or ``.test_tasks[goal]``."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    bench = benchmark(skill, seed)
    tasks = bench.train_tasks if split == "train" else bench.test_tasks
    return tasks[check_goal(goal, split, "goal")]


def observable_task(task: Any) -> Any:
    """The same ML1 task with the goal in the observation (``partially_observable=False``, as MT1 sets it): the
    task's pickled data with that one key changed."""
    from metaworld.types import Task

    data = pickle.loads(task.data)
    data["partially_observable"] = False
    return Task(env_name=task.env_name, data=pickle.dumps(data))


def make_skill_env(skill: str, seed: int) -> Any:
    """A fresh Meta-World env of ``skill`` (no task set yet); a MuJoCo model that fails to load is a UserError."""
    cls = benchmark(skill, seed).train_classes[skill]
    try:
        return cls()
    except Exception as err:
        raise UserError(f"MuJoCo failed to load the {skill} model ({type(err).__name__}: "
                        f"{' '.join(str(err).split())}); {_INSTALL}") from None


def expert_policy(skill: str) -> Any:
    """A fresh instance of ``skill``'s scripted expert (``metaworld.policies.ENV_POLICY_MAP[skill]``)."""
    check_skill(skill, need_expert=True, option="--source noise on --skill")
    return importlib.import_module("metaworld.policies").ENV_POLICY_MAP[skill]()


def task_name(skill: str, split: str, goal: int) -> str:
    """``mw-<skill>-<split>-g<goal:02d>``: the path-safe name of one ML1 goal."""
    return f"mw-{skill}-{split}-g{int(goal):02d}"


def parse_task_name(name: str) -> tuple[str, str, int]:
    """(skill, split, goal) of a task name; a UserError for a name that is not one."""
    match = _TASK.match(name)
    if match is None:
        raise UserError(f"task {name!r} is not a Meta-World ML1 task name (mw-<skill>-<train|test>-g<goal>)")
    return match["skill"], match["split"], int(match["goal"])


def parse_goals(text: str, split: str, option: str) -> list[int]:
    """Goal indices from ``"0-49"``, ``"0,3,7"``, ``"0-9,20"`` or ``""`` (none), checked to be in 0..49."""
    goals: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            span = range(int(low), int(high) + 1) if dash else [int(low)]
        except ValueError:
            raise UserError(f"{option}: {part!r} is not a goal index or range (write e.g. 0-49 or 0,3,7)") from None
        goals.extend(check_goal(g, split, option) for g in span)
    if len(set(goals)) != len(goals):
        raise UserError(f"{option}: {text!r} names a goal twice")
    return goals
