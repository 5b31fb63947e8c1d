"""Algorithm Distillation on k-armed bandits end to end: generate -> train AD and ED -> regret on held-out instances.

    from tasks.bandit.demo import run_demo
    summary = run_demo("data/demo-bandit", seed=0)          # report.md, regret.json, regret.png in that folder

The demo pipeline (:mod:`ad.demo_pipeline`) with the bandit's options and hooks (:class:`BanditDemoConfig`):

1. ``ad generate bandit``: UCB1 (c = 0.3 on Bernoulli, 0.5 on Gaussian bandits; or Thompson sampling) on
   ``instances`` bandits, every pull recorded (``<out>/data``).
2. ``ad train rl`` twice on the training instances: AD on whole histories (context = ``pulls`` by default, so one
   window holds a whole run and the evaluation never slides it), and ED (expert distillation: the same model
   trained on the last 10% of each history only, so its context is that long); with ``--methods`` also DPT, on the
   same histories or (``--dpt-data random``) on random contexts of the same instances (``<out>/data-random``).
3. In context on the held-out instances (:func:`evaluate_regret`: ``eval_envs`` runs each, the same reward noise
   for every policy): AD, ED, and the bandit algorithms themselves (Thompson sampling, UCB1, the UCB1 source where
   its coefficient is another, uniformly random pulls) for ``pulls`` pulls.
   The figure is the expected cumulative regret, sum over pulls of ``max(means) - means[arm]``.

Every stage resumes: re-running the same call skips finished work (delete ``<out>/ad`` or ``<out>/ed`` to retrain).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ad.config import make_config
from ad.errors import UserError
from ad.files import write_json_atomic
from tasks.bandit.demo_config import POLICIES, BanditDemoConfig

__all__ = ["POLICIES", "BanditDemoConfig", "run_demo", "evaluate_regret", "plot_regret", "write_results"]


def run_demo(out: str | Path = "data/demo-bandit", seed: int = 0, **options: Any) -> dict[str, Any]:
    """Run the bandit demo into ``out`` with ``seed`` (and any :class:`BanditDemoConfig` option); returns the summary
    (``<out>/regret.json``)."""
    from ad.demo_pipeline import run_ad_demo

    config = make_config(BanditDemoConfig, {"out": str(out), "seed": seed, **options}, source="bandit demo options")
    run_ad_demo(config)
    return json.loads((Path(config.out) / "regret.json").read_text())


def evaluate_regret(data: str | Path, checkpoints: dict[str, str | Path], envs_per_task: int = 2, seed: int = 0,
                    threads: int = 1) -> dict[str, Any]:
    """Expected cumulative regret of trained models (``checkpoints``: label -> ``ad train`` run folder) and of
    Thompson sampling, UCB1 and random pulls on the dataset's held-out instances, ``task_spec.pulls`` pulls each.

    Every policy meets the same instances and the same reward noise (same env seed). Returns per policy the mean
    cumulative-regret curve, its standard error over runs, and the final value.
    """
    import torch

    from ad.evaluate import RandomPolicy, run_in_context
    from ad.history import HistoryReader
    from ad.registry import env_factory, load_policy
    from tasks.bandit.algorithms import VectorPolicy

    if threads:
        torch.set_num_threads(threads)
    reader = HistoryReader(data)
    meta = reader.metadata
    spec = meta["task_spec"]
    tasks = list(meta["split"]["heldout"])
    if not tasks:
        raise UserError(f"dataset {data} has no held-out instances; generate it with --heldout-fraction > 0")
    pulls, arms, kind = int(spec["pulls"]), int(spec["arms"]), spec["kind"]
    noise = float(spec.get("noise_std") or 0.5)
    policies: dict[str, Any] = {name: load_policy(path, greedy=False, seed=seed) for name, path in checkpoints.items()}
    policies["Thompson"] = VectorPolicy("thompson", arms, kind, noise, seed=seed)
    policies["UCB1"] = VectorPolicy("ucb", arms, kind, noise, seed=seed)
    source = meta.get("source", {})
    ucb_c = float(source.get("config", {}).get("ucb_c", 1.0))
    if source.get("algorithm") == "ucb" and ucb_c != 1.0:  # the source itself, beside the textbook UCB1
        policies[f"UCB1 c={ucb_c:g}"] = VectorPolicy("ucb", arms, kind, noise, ucb_c=ucb_c, seed=seed)
    policies["random"] = RandomPolicy(arms, seed)
    own = {"ucb": "UCB1" if ucb_c == 1.0 else f"UCB1 c={ucb_c:g}", "thompson": "Thompson"}
    out: dict[str, Any] = {"instances": len(tasks), "runs_per_instance": envs_per_task, "pulls": pulls,
                           "source_policy": own.get(source.get("algorithm")), "policies": {}}
    for name, policy in policies.items():
        setup = env_factory("bandit")(meta, tasks, envs_per_task)
        started = time.perf_counter()
        run_in_context(policy, setup, pulls, seed=seed, name=name, progress=False)
        cumulative = setup.env.regret().cumsum(axis=1)  # (E, pulls)
        final = cumulative[:, -1]
        out["policies"][name] = {
            "final_regret": float(final.mean()), "final_regret_se": float(final.std() / np.sqrt(len(final))),
            "mean": cumulative.mean(axis=0).tolist(),
            "se": (cumulative.std(axis=0) / np.sqrt(len(final))).tolist(),
            "seconds": time.perf_counter() - started}
        print(f"{name:>9}: cumulative regret after {pulls} pulls {final.mean():7.2f} +- "
              f"{final.std() / np.sqrt(len(final)):.2f}", flush=True)
    ts = out["policies"]["Thompson"]["final_regret"]
    out["ratio_to_thompson"] = {name: row["final_regret"] / ts for name, row in out["policies"].items()}
    return out


def plot_regret(results: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Cumulative regret vs pull, mean +- one standard error, one line per policy."""
    from ad.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, row in results["policies"].items():
        mean, se = np.asarray(row["mean"]), np.asarray(row["se"])
        x = np.arange(1, len(mean) + 1)
        ax.plot(x, mean, label=f"{name} ({mean[-1]:.1f})", lw=2 if name in ("AD", "DPT") else 1.3)
        ax.fill_between(x, mean - se, mean + se, alpha=0.2)
    ax.set_xlabel("pull")
    ax.set_ylabel("cumulative expected regret")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def source_lines(summary: dict[str, Any]) -> list[str]:
    """AD's regret next to the regret of the algorithm whose histories it distilled, saying when AD trails it."""
    policies, source = summary["policies"], summary.get("source_policy")
    if "AD" not in policies or source not in policies:
        return []
    ad, own = policies["AD"]["final_regret"], policies[source]["final_regret"]
    ratio = ad / own if own > 0 else float("inf")
    verdict = ("AD trails its own source (more regret than the algorithm it distils)" if ad > own else
               "AD matches or beats its own source")
    return ["", f"AD's regret is {ratio:.2f}x its source's ({source}: {own:.2f}): {verdict}."]


def regret_lines(summary: dict[str, Any]) -> list[str]:
    """The body of the bandit demo's report: the held-out setting, the regret table, AD next to its source."""
    lines = [f"Held-out instances: {summary['instances']} (never in the transformer's training data), "
             f"{summary['runs_per_instance']} runs each, {summary['pulls']} pulls in context.", "",
             "| policy | cumulative regret | +- s.e. | / Thompson sampling |", "|---|---|---|---|"]
    for name, row in summary["policies"].items():
        lines.append(f"| {name} | {row['final_regret']:.2f} | {row['final_regret_se']:.2f} | "
                     f"{summary['ratio_to_thompson'][name]:.2f} |")
    return lines + source_lines(summary)


def write_results(out: Path, summary: dict[str, Any], methods: list[str]) -> Path:
    """``out/regret.json`` (the summary: settings, timings, every policy's regret), ``out/regret.png`` and
    ``out/report.md`` (``methods``: the trained policies' labels); returns the report's path."""
    from ad.report import methods_heading, write_report

    write_json_atomic(out / "regret.json", summary, indent=1)
    settings = summary["settings"]
    plot_regret(summary, out / "regret.png",
                title=f"{settings['arms']}-armed {settings['kind']} bandits: {summary['instances']} held-out "
                      f"instances x {summary['runs_per_instance']} runs")
    return write_report(out / "report.md", f"{methods_heading(methods)} on k-armed bandits: in-context regret",
                        regret_lines(summary), {"cumulative regret": "regret.png"}, summary["timings"], settings)
