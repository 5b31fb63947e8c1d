"""`report.md` of a demo run: settings, timings, the in-context table and the plots."""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from ad.atomic import write_text_atomic


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def write_report(out: Path, summary: dict[str, Any], timings: dict[str, float], settings: dict[str, Any],
                 images: dict[str, str], task: str = "DarkRoom") -> Path:
    """Write ``out/report.md`` from an ``ad eval`` summary of a demo on ``task``."""
    policies = summary["policies"]
    lines = [f"# Algorithm Distillation on {task}: in-context evaluation", "",
             f"Held-out tasks: {len(summary['tasks'])} (never in the transformer's training data), "
             f"{summary['seeds']} seeds each, {summary['episodes']} episodes in context, "
             f"{'greedy' if summary['greedy'] else 'sampled'} actions. "
             f"Mean optimal return: {summary['optimal_mean_return']:.2f}.", "",
             "| policy | return/optimal, first 5 episodes | episodes 36-40 | last 10 episodes | final mean return |",
             "|---|---|---|---|---|"]
    for name, row in policies.items():
        lines.append(f"| {name} | {row['first_episodes_normalised']:.3f} | "
                     f"{row.get('episode_40_normalised', float('nan')):.3f} | {row['last_episodes_normalised']:.3f} | "
                     f"{row['final_mean_return']:.2f} |")
    ad = policies.get("AD")
    if ad is not None:
        reached = next((i + 1 for i, v in enumerate(ad["normalised"]) if v >= 0.9), None)
        lines += ["", f"AD reaches 90% of the optimal return at episode {reached}." if reached else
                  "AD does not reach 90% of the optimal return within the evaluated episodes."]
    lines += ["", "## Plots", ""]
    lines += [f"![{title}]({path})" for title, path in images.items()]
    lines += ["", f"## Time ({machine_description()})", "", "| stage | seconds |", "|---|---|"]
    lines += [f"| {stage} | {seconds:.0f} |" for stage, seconds in timings.items()]
    lines += ["", "## Settings", "", "```"]
    lines += [f"{key}: {_fmt(value)}" for key, value in settings.items()]
    lines += ["```", ""]
    path = out / "report.md"
    write_text_atomic(path, "\n".join(lines))
    return path


def machine_description() -> str:
    """The machine a run's timings were taken on, e.g. ``2 CPU cores (x86_64), no GPU``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    gpu = "no GPU"
    try:
        import torch

        if torch.cuda.is_available():
            gpu = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return f"{cores} CPU cores ({platform.machine()}), {gpu}"
