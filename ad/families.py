"""Task families: what one folder under ``tasks/`` provides to the core, behind one small interface.

A task family (DarkRoom, Dark Key-to-Door, bandits ...) is a package that, when imported, calls
:func:`register_family` once with a :class:`TaskFamily`, and is declared as a plugin in its distribution::

    [project.entry-points."ad.plugins"]
    keydoor = "tasks.keydoor"

That single registration gives the family ``ad generate <name>`` (its source algorithm writing learning
histories), the evaluation env ``ad eval`` builds for its held-out tasks, and (optionally) ``ad demo --task <name>``.

The dataset contract every family's ``ad generate`` writes into ``dataset.json`` (read by
:func:`ad.history.reader.task_split`, :mod:`ad.commands.evaluate` and the demos): path-safe task ids (the ``task``
column), the held-out split ``metadata["split"] = {"train": [...], "heldout": [...]}`` seeded by ``--seed`` (models
train on ``train`` tasks only), each task's ``optimal_return`` where its env reports none, and the ``task_spec``
(the state and action spaces, recorded again beside every checkpoint); the fields of :class:`TaskFamily` say the
rest, so the core needs no knowledge of any family.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ad.registry import FAMILIES, lazy_function, register, register_demo


@dataclass(frozen=True)
class TaskFamily:
    """Everything the core needs from a task family (see the module docstring for the dataset contract)."""

    name: str  #: the datasets' ``family`` and the name in ``ad generate <name>`` / ``ad demo --task <name>``
    summary: str  #: one line shown by ``ad --help``
    generate_config: type  #: typed options of the source algorithm (``ad generate <name> --help``)
    generate: Callable[[Any], Any]  #: ``generate(config)``: run the source algorithm, write learning histories
    #: the registered Gymnasium id (with a ``vector_entry_point``) whose ``gymnasium.make_vec`` builds ``ad eval``'s
    #: envs over many tasks at once (a dataset that records ``task_spec["env_id"]`` names its own)
    gym_id: str | None = None
    #: ``eval_kwargs(metadata, tasks) -> dict``: the ``make_vec`` kwargs that play ``tasks`` with a dataset's recorded
    #: task spec (default: each task's recorded ``kwargs``, passed as ``tasks=[...]``). A family that gives
    #: ``gym_id`` or ``eval_kwargs`` is evaluated in context (:func:`ad.evaluate.make_eval_env`)
    eval_kwargs: Callable[[dict, list], dict] | None = None
    #: ``ad demo --task <name>`` (the RL-format transformer): an :class:`ad.demo.DemoConfig` subclass, its
    #: options and the hooks where the family differs, run by the demo pipeline (generate -> train -> evaluate -> report)
    demo_config: type | None = None
    #: ``task_spec`` keys that parametrise the eval envs (e.g. a grid's size): ``ad eval`` refuses a checkpoint whose
    #: training data recorded other values for them
    task_kwargs: tuple[str, ...] = ()
    #: ``optimal_actions(metadata, task, stream) -> (T,) int64``: the optimal action at each row of one stream of
    #: ``task`` (``stream`` maps the history columns ``state``, ``action``, ``reward``, ``episode``, ``step`` to
    #: (T,) arrays in history order, so a family whose optimum depends on the episode so far, e.g. whether a key
    #: is carried, can read it); the target of objectives that imitate an optimal policy (DPT). None: unknown
    optimal_actions: Callable[[dict, str, dict], Any] | None = None
    #: ``posterior_action_probs(metadata, batch) -> (B, T, A) float32``: for windows of a dataset (``batch`` maps the
    #: RL-format keys ``states``, ``actions``, ``rewards``, ``timesteps`` to (B, T) arrays), the probability that each
    #: action is optimal at each row given the window's rows before it, the task drawn from the family's own task
    #: distribution: the expectation of ``optimal_actions`` over every task the window allows, so it never reads the
    #: window's own task (``ad train rl --objective dpt --dpt-target posterior``). None: unknown
    posterior_action_probs: Callable[[dict, dict], Any] | None = None
    #: the discrete actions in the order in which ``optimal_actions`` lists the tasks (a grid room's, rows first:
    #: up, left, noop, right, down): ``ad eval --sampling episode`` picks each action where one uniform draw per
    #: episode falls in the policy's probabilities summed in this order, so a policy that predicts the optimal action
    #: under its belief about the task (DPT) walks to one task the belief allows for the whole episode. None: the
    #: actions' own order
    action_order: tuple[int, ...] | None = None
    #: the family ``ad demo`` runs without ``--task``; its ``ad generate`` folder is the default ``--data``
    default: bool = False


def register_family(family: TaskFamily) -> None:
    """Register a task family: its ``ad generate`` command, its ``ad eval`` env and its ``ad demo --task`` entry."""
    register("generate", family.name, family.generate_config, family.generate, help=family.summary)
    FAMILIES[family.name] = family  # its eval env, optimal actions, default-ness: read by ad.registry
    if family.demo_config is not None:
        register_demo(family.name, "rl", family.demo_config, lazy_function("ad.demo:run"),
                      help=f"Algorithm Distillation on {family.name} end to end (writes report.md)")


def seeded_split(n: int, heldout_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """The held-out split a family's generator records: ids ``0..n-1`` permuted with ``seed``, the first
    ``round(heldout_fraction * n)`` held out (at least one id stays in train). Both lists come back sorted."""
    n_heldout = min(int(round(heldout_fraction * n)), n - 1) if n > 1 else 0
    order = np.random.default_rng([seed, n]).permutation(n)
    heldout = sorted(order[:n_heldout].tolist())
    chosen = set(heldout)
    return [i for i in range(n) if i not in chosen], heldout
