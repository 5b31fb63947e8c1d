"""The field's in-context methods on the same histories: DPT (the Decision-Pretrained Transformer, trained on the
optimal action of every state) beside AD and ED, on the same held-out tasks, through ``ad demo --methods``.

Per family (one run of this script each): the family's demo with ``--methods`` once per seed (seeds draw different
held-out splits), then one figure per method and measure:

* bandit: cumulative expected regret after all pulls over Thompson sampling's on the same instances and reward
  noise (DPT's goal: <= 1.1x, the DPT paper's finding that DPT matches Thompson sampling); AD and ED beside;
* darkroom / keydoor: return / optimal at in-context episodes 1-5 and 36-40 of DPT, AD and ED (goal: >= 0.9 at
  36-40), with AD's value as DPT's reference, and the first episode at which each reaches 90% of the optimum
  (which method learns faster in context).

    python benchmarks/in_context_methods.py --config configs/bandit/in_context_methods.yaml
    python benchmarks/in_context_methods.py --config configs/darkroom/in_context_methods.yaml
    python benchmarks/in_context_methods.py --family darkroom --quick    # tiny settings, well under a minute

Results: benchmarks/results/in_context_methods.json, one list holding every family's figures: a run replaces the
figures of its own family (and size) and keeps the others' as they were (*_quick.json for --quick).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, demo_wall_time_figures, figure, merge_report, parse_args  # noqa: E402

FAMILIES = ("bandit", "darkroom", "keydoor")


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="bandit", choices=FAMILIES, help="task family whose demo runs")
    parser.add_argument("--methods", default="ad,dpt,ed", help="in-context methods (ad demo --methods)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="demo seeds (held-out splits)")
    parser.add_argument("--out", default="data/bench-in-context-methods", help="work folder (a demo folder per seed)")
    parser.add_argument("--keep", action="store_true", help="keep demo folders: a finished demo of the same options is read "
                                                            "back, an unfinished one resumes")
    parser.add_argument("--demo", type=json.loads, default={},
                        help="more `ad demo --task <family>` options, as JSON (a mapping in a --config file)")
    parser.add_argument("--variant", default="", help="name of a variant of the demo options (e.g. roundrobin): it "
                                                       "names the demo folders and the figures' family tag")
    parser.add_argument("--headline", action="store_true",
                        help="this run's DPT figure (bandit: regret / Thompson sampling's; grid families: episodes "
                             "36-40) becomes the capability's headline, replacing the one in the results file")
    parser.add_argument("--supersedes", nargs="*", default=[],
                        help="figure families (tags such as bandit, darkroom9-dpt4000) this run supersedes: their "
                             "figures are kept, marked current: false")
    parser.add_argument("--quick", action="store_true", help="a small version of the same work")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402

#: tiny demo options per family for --quick
QUICK = {"bandit": dict(instances=40, pulls=50, ad_steps=30, ed_steps=10, dpt_steps=30, eval_envs=2),
         "darkroom": dict(size=5, steps_per_goal=2400, streams=4, ad_steps=30, ed_steps=10, dpt_steps=30,
                          episodes=40, seeds=1, context=100),
         "keydoor": dict(tasks=30, steps_per_task=20_000, ad_steps=30, ed_steps=10, dpt_steps=30, episodes=40,
                         seeds=1, context=60, subsample=4)}
#: in a demo folder: the options of the finished demo (``--keep`` reads a finished demo back)
FINISHED = "bench_options.json"
#: the in-context episode windows of the grid families' table (1-based, inclusive)
WINDOWS = ((1, 5), (36, 40))
LEVEL = 0.9


def run_demo(family: str, out: Path, seed: int, methods: str, demo: dict) -> dict:
    """Run ``ad demo --task family --methods ...`` into ``out``; the bandit's regret summary, else ``eval.json``. A
    finished demo of the same options (kept with ``--keep``) is read back instead of evaluated again."""
    from dataclasses import asdict

    from ad import registry
    from ad.config import make_config
    from ad.demo import evaluation_folder_name

    command = registry.get_demo(family, "rl")
    config = make_config(command.config_cls, {**demo, "methods": methods, "seed": seed, "out": str(out)},
                         source="in_context_methods demo options")
    results = config.results_folder()  # out, or its evaluation sampled another way (temperature, rule)
    evaluation = out / evaluation_folder_name(config) / "eval.json"
    summary = results / "regret.json" if family == "bandit" else evaluation
    if summary.is_file() and (results / FINISHED).is_file() and finished_options(results, config) == asdict(config):
        print(f"{out}: finished with the same options, reading {summary}")
        return json.loads(summary.read_text())
    command.run(config)  # the demo pipeline, whichever the family (trained models in `out` are reused)
    (results / FINISHED).write_text(json.dumps(asdict(config)))
    return json.loads(summary.read_text())


def finished_options(folder: Path, config: object) -> dict:
    """The options a finished demo recorded in ``folder`` ran with; an option added since then reads as its
    default."""
    from dataclasses import MISSING, fields

    defaults = {f.name: f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
                for f in fields(config) if f.default is not MISSING or f.default_factory is not MISSING}
    return {**defaults, **json.loads((folder / FINISHED).read_text())}


def window(row: dict, first: int, last: int) -> float:
    """Mean return / optimal of an eval.json row over episodes first..last (nan when it has fewer)."""
    curve = row.get("normalised") or []
    return float(np.mean(curve[first - 1:last])) if len(curve) >= last else float("nan")


def reaching(row: dict) -> int | None:
    """First in-context episode whose mean return / optimal is at least LEVEL (None if none is)."""
    return next((i + 1 for i, v in enumerate(row.get("normalised") or []) if v >= LEVEL), None)


def per_seed(seeds: list[int], ours: list[float], reference: list[float] | None) -> dict:
    """Each seed's value (and ratio) and the spread over seeds."""
    rows = [{"seed": s, "ours": o, **({"reference": r, "ratio": o / r if r else None} if reference else {})}
            for s, o, r in zip(seeds, ours, reference or [None] * len(ours))]
    values = [r.get("ratio", r["ours"]) for r in rows if r.get("ratio", r["ours"]) is not None]
    return {"per_seed": rows, "spread": [min(values), max(values)] if values else None}


def dpt_contexts(options: dict) -> str:
    """What DPT trained on, for a figure's setting text ("" where it is the demo's own histories)."""
    if options.get("dpt_data") == "transitions":
        return ", DPT on independent transitions from uniformly drawn cells"
    if options.get("dpt_data") == "noise":
        return ", DPT on noise-distillation histories (epsilon 1 to 0)"
    if options.get("dpt_data", "source") != "random":
        return ""
    histories = options.get("random_histories", 1)
    return f", DPT on random contexts{f' ({histories} per instance)' if histories > 1 else ''}"


def tempered(temperature: float, short: bool = False, sampling: str = "step") -> str:
    """', actions sampled at temperature T' (``short``: ', temperature T') for an evaluation at a temperature other
    than 1, then ', one draw per episode' for one sampled that way (``ad eval --sampling episode``), else ''."""
    text = "" if temperature == 1.0 else f", {'' if short else 'actions sampled at '}temperature {temperature:g}"
    return text + (", one draw per episode" if sampling == "episode" else "")


def model_size(options: dict) -> str:
    """', <L> blocks of width <W>' when a bandit demo's models are not the demo's default size (2 blocks of width
    64), else ''."""
    layers = options.get("n_layer", 2)
    width = (options.get("train_overrides") or {}).get("n_embd", 64)
    return "" if (layers, width) == (2, 64) else f", {layers} blocks of width {width}"


def bandit_figures(seeds: list[int], runs: list[dict], labels: list[str], tag: str = "bandit",
                   headline: bool = False) -> list[dict]:
    """Regret of every method over Thompson sampling's (DPT's goal <= 1.1x), and DPT's over AD's; with ``headline``
    the DPT figure is the capability's headline."""
    first = runs[0]
    options = first["settings"]
    steps = ", ".join(f"{label} {options.get(label.lower() + '_steps') or options['ad_steps']} steps"
                      for label in labels)
    setting = (f"{options['arms']}-armed {options['kind']}, {first['instances']} held-out instances of "
               f"{options['instances']} x "
               f"{first['runs_per_instance']} runs, {first['pulls']} pulls, source {options['source']} "
               f"c={options['ucb_c']:g}{dpt_contexts(options)}{model_size(options)}, {steps}"
               f"{tempered(options.get('temperature', 1.0))}, seeds "
               f"{', '.join(map(str, seeds))}")

    def regret(name: str) -> list[float]:
        return [run["policies"][name]["final_regret"] for run in runs]

    ts = regret("Thompson")
    figures = []
    for label in labels + ["random"]:
        ours = regret(label)
        goal = "<= 1.1x" if label == "DPT" else "-"
        figures.append({**figure(f"{label} regret / Thompson sampling's after {first['pulls']} pulls ({setting})",
                                 "regret", float(np.mean(ours)), float(np.mean(ts)), goal, higher_is_better=False),
                        **per_seed(seeds, ours, ts)})
        if label == "DPT" and headline:  # the capability's headline: DPT against the algorithm the DPT paper says it matches
            figures[-1].update(headline=True, vs="Thompson sampling",
                               short=f"DPT regret over {first['pulls']} pulls, {first['settings']['arms']}-armed "
                                     f"{first['settings']['kind']}"
                                     f"{', random contexts' if options.get('dpt_data') == 'random' else ''}"
                                     f"{tempered(options.get('temperature', 1.0), short=True)}, seeds "
                                     f"{', '.join(map(str, seeds))}")
    if "DPT" in labels and "AD" in labels:
        figures.append({**figure(f"DPT regret / AD's after {first['pulls']} pulls ({setting})", "regret",
                                 float(np.mean(regret("DPT"))), float(np.mean(regret("AD"))), "-",
                                 higher_is_better=False), **per_seed(seeds, regret("DPT"), regret("AD"))})
    return figures


def grid_setting(tag: str, seeds: list[int], first: dict, options: dict | None) -> str:
    """The setting text of a grid family's figures (``first``: the first seed's eval.json)."""
    return (f"{tag}{dpt_contexts(options or {})}, {len(first['tasks'])} held-out tasks x {first['seeds']} seeds, "
            f"{first['episodes']} episodes in context"
            f"{tempered(first.get('temperature', 1.0), sampling=first.get('sampling', 'step'))}, seeds "
            f"{', '.join(map(str, seeds))}")


def grid_figures(family: str, seeds: list[int], runs: list[dict], labels: list[str], tag: str,
                 options: dict | None = None, headline: bool = False) -> list[dict]:
    """Return / optimal at episodes 1-5 and 36-40 per method (DPT's reference: AD's), and when each reaches 90%;
    with ``headline`` DPT's figure at episodes 36-40 is the capability's headline."""
    first = runs[0]
    setting = grid_setting(tag, seeds, first, options)
    figures = []
    for a, b in WINDOWS:
        values = {name: [window(run["policies"][name], a, b) for run in runs]
                  for name in labels + ["random", "source"] if name in first["policies"]}
        for name, ours in values.items():
            if all(np.isnan(ours)):  # the source's histories may end before the window
                continue
            ref = values.get("AD") if name != "AD" else None
            goal = ">= 0.9" if (a, b) == (36, 40) and name in ("DPT", "AD") else "-"
            text = f"{name} return / optimal, episodes {a}-{b}{' / AD' if ref else ''} ({setting})"
            figures.append({**figure(text, "return/optimal", float(np.nanmean(ours)),
                                     float(np.nanmean(ref)) if ref else None, goal), **per_seed(seeds, ours, ref)})
            if headline and name == "DPT" and (a, b) == (36, 40):
                figures[-1].update(headline=True, vs="AD" if ref else None,
                                   short=f"DPT return / optimal at episodes 36-40, {tag}, seeds "
                                         f"{', '.join(map(str, seeds))}")
    for name in labels:
        reached = [reaching(run["policies"][name]) for run in runs]
        shown = [r if r is not None else first["episodes"] + 1 for r in reached]
        figures.append({**figure(f"{name}: first in-context episode at {LEVEL:.0%} of the optimal return (episodes + 1 "
                                 f"= never; {setting})", "episode", float(np.mean(shown)), None, "-",
                                 higher_is_better=False), "per_seed": [{"seed": s, "ours": r}
                                                                      for s, r in zip(seeds, reached)]})
    return figures


def keydoor_outcome_figures(seeds: list[int], runs: list[dict], labels: list[str], setting: str) -> list[dict]:
    """Where a Key-to-Door policy's return goes, per method: the share of its episodes 36-40 that collect both
    rewards (the key's and the door's: the optimal return), the share of its runs (held-out pair x evaluation seed)
    that collected both in some episode up to the 35th (had found the door), and over all its episodes how often
    the next episode repeats an episode with both rewards, or one with the key's only (a return between 0 and the
    optimum)."""
    figures = []
    for name in labels:
        returns = [np.asarray(run["policies"][name]["returns"]) for run in runs]  # (tasks, seeds, episodes) each
        optimum = [run["optimal_mean_return"] for run in runs]
        if any(r.ndim != 3 or r.shape[-1] < 40 for r in returns):
            continue
        full = [r >= best - 1e-6 for r, best in zip(returns, optimum)]  # (tasks, seeds, episodes) each
        both = [float(f[..., 35:40].mean()) for f in full]
        found = [float(f[..., :35].any(-1).mean()) for f in full]
        partial = [(r > 1e-6) & ~f for r, f in zip(returns, full)]
        kept = [repeated(f) for f in full]
        stuck = [repeated(p) for p in partial]
        for text, values in ((f"{name}: share of episodes 36-40 that collect both rewards ({setting})", both),
                             (f"{name}: share of runs that collected both rewards in an episode up to the 35th "
                              f"({setting})", found),
                             (f"{name}: share of episodes after one with both rewards that collect both again "
                              f"({setting})", kept),
                             (f"{name}: share of episodes after one with the key's reward only that again collect "
                              f"the key's only ({setting})", stuck)):
            known = [v for v in values if v is not None]  # a seed without such an episode has no share
            if known:
                figures.append({**figure(text, "share", float(np.mean(known)), None, "-"),
                                **per_seed(seeds, values, None)})
    return figures


def repeated(mask: np.ndarray) -> float | None:
    """Of the episodes marked in ``mask`` (..., episodes) that have a next episode, the share whose next one is
    marked too (None where none is marked)."""
    before = mask[..., :-1]
    return float(mask[..., 1:][before].mean()) if before.any() else None


#: the headline-page row of these figures; its headline is DPT's bandit regret over Thompson sampling's
CAPABILITY = "In-context methods on the same data (ad demo --methods)"


def main(args: argparse.Namespace) -> None:
    from ad.demo import METHODS, eval_folder_name, parse_methods

    methods = parse_methods(args.methods)
    labels = [METHODS[m] for m in methods]
    demo = {**args.demo, **(QUICK[args.family] if args.quick else {})}
    tag = args.family if args.family != "darkroom" else f"darkroom{demo.get('size', 9)}"
    tag += f"-{args.variant}" if args.variant else ""
    folder_tag = tag  # the demo folders: an evaluation sampled another way reuses the trained models
    evaluation = eval_folder_name(float(demo.get("temperature", 1.0)), demo.get("sampling", "step"))
    resampled = evaluation != "eval"
    tag += evaluation[len("eval"):]  # "-temperature-<T>", "-sampling-<rule>"
    seeds, runs, outs = list(args.seeds), [], []
    for seed in seeds:
        out = Path(args.out) / f"{folder_tag}-seed{seed}{'-quick' if args.quick else ''}"
        if out.exists() and not args.keep:
            shutil.rmtree(out)
        runs.append(run_demo(args.family, out, seed, ",".join(methods), demo))
        outs.append(out)
    headline = args.headline and not args.quick
    if args.family == "bandit":
        figures = bandit_figures(seeds, runs, labels, tag, headline)
    else:
        results = outs[0] / evaluation if resampled else outs[0]
        options = json.loads((results / FINISHED).read_text())
        figures = grid_figures(args.family, seeds, runs, labels, tag, options, headline)
        if args.family == "keydoor":
            figures += keydoor_outcome_figures(seeds, runs, labels, grid_setting(tag, seeds, runs[0], options))
    if not resampled:  # sampled another way the demo only evaluated: its timings are not the demo's
        figures += demo_wall_time_figures(outs, seeds, f"ad demo --methods {','.join(methods)}", tag)
    merge_report("in_context_methods", args.quick, tag, figures, tuple(args.supersedes), capability=CAPABILITY,
                 page="in-context-methods")
    if not args.quick:
        plot(args.family, seeds, runs, labels, tag)


def plot(family: str, seeds: list[int], runs: list[dict], labels: list[str], tag: str) -> Path:
    """benchmarks/results/in_context_methods_<tag>.png: per seed, the bandit's cumulative regret of the methods and
    Thompson sampling, or the grid family's return / optimal per in-context episode of the methods, AD's reference
    and random."""
    from ad.plots import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4), squeeze=False)
    for ax, seed, run in zip(axes[0], seeds, runs):
        if family == "bandit":
            for name in labels + ["Thompson", "random"]:
                mean = np.asarray(run["policies"][name]["mean"])
                ax.plot(np.arange(1, len(mean) + 1), mean, label=f"{name} ({mean[-1]:.1f})",
                        lw=2 if name in labels else 1.2)
            ax.set(xlabel="pull", ylabel="cumulative expected regret", yscale="log")
        else:
            for name in labels + ["random", "source"]:
                curve = run["policies"].get(name, {}).get("normalised")
                if curve:
                    ax.plot(np.arange(1, len(curve) + 1), curve, label=name, lw=2 if name in labels else 1.2)
            ax.axhline(LEVEL, color="grey", ls=":", lw=1)
            ax.set(xlabel="in-context episode", ylabel="return / optimal", ylim=(0, 1.05))
        ax.set_title(textwrap.fill(f"{tag}, seed {seed}", 60), fontsize=10)  # long tags wrap inside the panel
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, RESULTS / f"in_context_methods_{tag}.png")


if __name__ == "__main__":
    main(ARGS)
