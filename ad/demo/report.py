"""The report of a demo run (`report.md`): the demo's own table, its plots, the time each stage took, its settings.

:func:`write_report` writes every demo's report; :func:`in_context_lines` is the table of the demos evaluated by
``ad eval`` (return / optimal per episode window, when each method reaches 90% of the optimum).
"""
from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any, Sequence

from ad.files import write_text_atomic
from ad.evaluate import episodes_36_40


def window_mean(row: dict[str, Any], first: int, last: int) -> float | None:
    """Mean return / optimum of an eval.json policy row over episodes ``first``..``last`` (1-based, inclusive);
    None when the row has fewer episodes."""
    curve = row.get("normalised") or []
    return float(sum(curve[first - 1:last]) / (last - first + 1)) if len(curve) >= last else None


def first_reaching(row: dict[str, Any], level: float) -> int | None:
    """The first episode (1-based) whose mean return / optimum is at least ``level``; None if none is."""
    return next((i + 1 for i, v in enumerate(row.get("normalised") or []) if v >= level), None)


def table_lines(summary: dict[str, Any], windows: Sequence[tuple[int, int]] = ((36, 40),)) -> list[str]:
    """The in-context table: first 5 episodes, each of ``windows``, the last 10 episodes (which ones: a source
    with fewer episodes than the policies has its own last 10, named in its cell) and the final mean return."""
    policies = summary["policies"]
    episodes = int(summary["episodes"])
    span = (max(1, episodes - 9), episodes)
    header = ["policy", "return/optimal, first 5 episodes", *(f"episodes {a}-{b}" for a, b in windows),
              f"last 10 episodes ({span[0]}-{span[1]})", "final mean return"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, row in policies.items():
        cells = [name, f"{row['first_episodes_normalised']:.3f}"]
        for a, b in windows:
            value = episodes_36_40(row) if (a, b) == (36, 40) and "normalised" not in row else window_mean(row, a, b)
            cells.append("-" if value is None or value != value else f"{value:.3f}")
        own = tuple(row.get("last_episodes") or span)
        cells.append(f"{row['last_episodes_normalised']:.3f}" + ("" if own == span else
                                                                  f" (episodes {own[0]}-{own[1]})"))
        cells.append(f"{row['final_mean_return']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def reach_lines(policies: dict[str, Any], level: float = 0.9, names: Sequence[str] = ("AD",)) -> list[str]:
    """When each of ``names`` (AD by default) first reaches ``level`` of the optimal return, next to the source,
    saying when it trails the source."""
    lines = []
    for name in names:
        row, source = policies.get(name), policies.get("source")
        if row is None:
            continue
        reached = first_reaching(row, level)
        text = (f"{name} reaches {level:.0%} of the optimal return at episode {reached}" if reached else
                f"{name} does not reach {level:.0%} of the optimal return within the evaluated episodes")
        if source is not None:
            own = first_reaching(source, level)
            text += f", its source at episode {own}" if own else (
                f"; its source does not within its {len(source.get('normalised') or [])} episodes")
            if own and (reached is None or reached > own):
                text += (f" ({name} trails its own source: it learns in context more slowly than the algorithm "
                         + ("it distils)" if name == "AD" else "whose histories it was trained on)"))
        lines.append(text + ".")
    return lines


def methods_heading(methods: Sequence[str]) -> str:
    """What a demo of the trained policies ``methods`` (labels) compares: "Algorithm Distillation" for AD and ED."""
    return "Algorithm Distillation" if set(methods) <= {"AD", "ED"} else f"In-context methods ({', '.join(methods)})"


def in_context_lines(summary: dict[str, Any], windows: Sequence[tuple[int, int]] = ((36, 40),),
                     methods: Sequence[str] = ("AD", "ED")) -> list[str]:
    """The body of an ``ad eval`` summary's report: the held-out setting, the table (:func:`table_lines`; ``windows``
    are the episode ranges shown beside the first 5 and the last 10, the figures a family's docs quote) and, for each
    of ``methods`` (the trained policies' labels) but ED, when it first reaches 90% of the optimum."""
    lines = [f"Held-out tasks: {len(summary['tasks'])} (never in the transformer's training data), "
             f"{summary['seeds']} seeds each, {summary['episodes']} episodes in context, "
             f"{_acting(summary)}. "
             f"Mean optimal return: {summary['optimal_mean_return']:.2f}.", ""]
    lines += table_lines(summary, windows)
    reach = reach_lines(summary["policies"], names=[m for m in methods if m != "ED"])
    return lines + (["", *reach] if reach else [])


def _acting(summary: dict[str, Any]) -> str:
    """How the evaluated policies acted: greedy, sampled, or sampled at a temperature other than 1, afresh at every
    step or by one draw per episode."""
    if summary["greedy"]:
        return "greedy actions"
    temperature = summary.get("temperature", 1.0)  # evaluations written before the option existed sampled at 1
    acting = "sampled actions" if temperature == 1.0 else f"actions sampled at temperature {temperature:g}"
    if summary.get("sampling", "step") == "episode":  # written before the option existed: afresh at every step
        acting += ", one draw per episode"
    return acting


def write_report(path: Path, heading: str, body: Sequence[str], images: dict[str, str], timings: dict[str, float],
                 settings: dict[str, Any]) -> Path:
    """Write a demo's report to ``path``: ``# heading``, the demo's ``body`` lines (its table), the plots (title ->
    path relative to the report), the time of each stage and the settings."""
    lines = [f"# {heading}", "", *body, "", "## Plots", ""]
    lines += [f"![{title}]({image})" for title, image in images.items()]
    lines += ["", f"## Time ({machine_description()})", "", "| stage | seconds |", "|---|---|"]
    lines += [f"| {stage} | {seconds:.0f} |" for stage, seconds in timings.items()]
    lines += ["", "## Settings", "", "```"]
    lines += [f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}"
              for key, value in settings.items()]
    lines += ["```", ""]
    write_text_atomic(path, "\n".join(lines))
    return path


def machine_description() -> str:
    """The machine a run's timings were taken on, e.g. ``2 CPU cores (x86_64), no GPU``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    gpu = "no GPU"
    with contextlib.suppress(ImportError):
        import torch

        if torch.cuda.is_available():
            gpu = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    return f"{cores} CPU cores ({platform.machine()}), {gpu}"
