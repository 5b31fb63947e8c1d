"""``ad demo [--task FAMILY] [--model rl|lm] [options]``: Algorithm Distillation end to end on small CPU settings.

Task and model families register their demos (:func:`ad.registry.register_demo`; a task family through
:func:`ad.families.register_family`); ``--task`` and ``--model`` pick one, whose own options follow
(``ad demo --task bandit --help``). Without them: the task family registered as the default, ``--model rl``.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Sequence

from ad import registry
from ad.config import option
from ad.errors import UserError
from ad.registry import register


@dataclass
class DemoChoice:
    """Which demo ``ad demo`` runs; each has its own further options."""

    task: str | None = option(None, "task family (default: the family registered as the default)")
    model: str = option(registry.DEFAULT_MODEL, "model family: rl (the RL-format transformer) or lm (a causal "
                                                  "language model on the Language format)")


def select_demo(argv: Sequence[str]) -> tuple[registry.Command, list[str], dict[str, tuple[str, list[str]]]]:
    """Read ``--task`` / ``--model`` from ``argv``: (the chosen demo, ``argv`` for its options, the two selectors'
    help and choices for :func:`ad.config.parse_config`)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--task", default=None)
    parser.add_argument("--model", default=registry.DEFAULT_MODEL)
    choice, _ = parser.parse_known_args(list(argv))
    default_task = registry.default_family()
    if choice.task is None and default_task is None:
        raise UserError("no task family is registered as the default demo; pass --task")
    cmd = registry.get_demo(choice.task or default_task, choice.model)
    # every demo (each plugin loaded) only where --help lists them; a run needs only the chosen one
    pairs = list(registry.demos()) if {"-h", "--help"} & set(argv) else [(choice.task or default_task, choice.model)]
    with_model = ", ".join(f"{m} ({', '.join(t for t, m2 in pairs if m2 == m)})" for m in dict.fromkeys(m for _, m in pairs))
    selectors = {
        "task": (f"task family (default: {default_task}); each demo has its own options: "
                 "`ad demo --task T --model M --help`", sorted({t for t, _ in pairs})),
        "model": (f"model family (default: {registry.DEFAULT_MODEL}): rl = the RL-format transformer, lm = a causal "
                  f"language model on the Language format; demos by model: {with_model}", sorted({m for _, m in pairs})),
    }
    return cmd, list(argv), selectors


def run(config: DemoChoice) -> int:  # pragma: no cover - the CLI dispatches through select_demo
    raise UserError("run a demo through the command line: ad demo --task T --model M")


register("ad", "demo", DemoChoice, run, "Algorithm Distillation end to end on small settings (writes report.md; "
                                       "--task / --model pick the demo)")
