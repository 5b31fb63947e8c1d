"""Algorithm Distillation on Dark Key-to-Door: AD's return / optimal on held-out key/door pairs over the in-context
episodes, next to ED (expert distillation: the same model on the histories' last episodes only), the source A2C's
own first episodes on the same pairs (its learning curve from scratch) and uniformly random actions. The whole demo
(``ad demo --task keydoor``: generate -> train AD -> train ED -> ``ad eval``) runs once per seed; seeds draw
different key/door pairs and held-out splits. Also the cost of AD's longer context: ``ad train rl`` optimiser
steps/s at the demo's context next to DarkRoom's 80, on the same data, in the same run.

    python benchmarks/ad_keydoor.py [--seeds 0 1] [--out data/bench-keydoor]
    python benchmarks/ad_keydoor.py --quick      # 30 pairs, short histories and training (well under a minute)

Results: benchmarks/results/ad_keydoor.json (+ ad_keydoor.png), *_quick.json for --quick. Timings are taken on a
machine whose 2 cores are shared with other jobs.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS, figure, parse_args, report, timed  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="demo seeds (pairs and held-out splits)")
    parser.add_argument("--out", default="data/bench-keydoor", help="work folder (one demo folder per seed)")
    parser.add_argument("--keep", action="store_true", help="keep demo folders: a finished demo (eval.json and its "
                                                             "recorded time) is reused, an unfinished one resumes")
    parser.add_argument("--speed-steps", type=int, default=200, help="optimiser steps timed per context length")
    parser.add_argument("--parallel", action="store_true", help="run the seeds' demos at once, one process each "
                                                                   "(their wall times then include sharing the cores)")
    parser.add_argument("--quick", action="store_true", help="a small version of the same work")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

import numpy as np  # noqa: E402
from ad.config import make_config  # noqa: E402
from ad.demo import run_ad_demo  # noqa: E402
from tasks.keydoor.demo import KeyDoorDemoConfig  # noqa: E402


QUICK = dict(tasks=30, steps_per_task=20_000, ad_steps=40, ed_steps=20, episodes=10, seeds=1, context=60, subsample=4)
#: the in-context episodes of the headline figure (1-based, inclusive)
WINDOW = (46, 50)
#: where a demo folder keeps its measured time (``--keep`` reuses a finished demo and its time)
TIME_FILE = "bench_time.json"
#: DarkRoom's context (the transitions the DarkRoom demo trains on), for the cost of the longer one
DARKROOM_CONTEXT = 80


def train_speed(data: Path, work: Path, context: int, steps: int, threads: int) -> float:
    """Optimiser steps/s of ``ad train rl`` (the demo preset, AD's subsampling) at ``context`` on ``data``."""
    from ad import registry

    train = registry.get("train", "rl")
    out = work / f"speed-{context}"
    shutil.rmtree(out, ignore_errors=True)
    cfg = make_config(train.config_cls, {"data": str(data), "out": str(out), "context": context, "max_steps": steps,
                                         "threads": threads, "val_every": 0, "progress": False, "subsample": 1,
                                         "checkpoint_every": 10 * steps})
    started = time.perf_counter()
    train.run(cfg)
    return steps / (time.perf_counter() - started)


def main(args: argparse.Namespace) -> None:
    options = QUICK if args.quick else {}
    window = (1, options["episodes"]) if args.quick else WINDOW

    outs = {seed: Path(args.out) / f"seed{seed}{'-quick' if args.quick else ''}" for seed in args.seeds}
    for out in outs.values():
        if out.exists() and not args.keep:
            shutil.rmtree(out)
    configs = {seed: make_config(KeyDoorDemoConfig, {"out": str(out), "seed": seed, **options},
                                 source="benchmark options") for seed, out in outs.items()}
    seconds = {seed: recorded_time(out) for seed, out in outs.items() if args.keep}
    todo = {seed: config for seed, config in configs.items() if seconds.get(seed) is None}
    if args.parallel and len(todo) > 1:  # one process per seed: each demo's wall time is its own (sharing the cores)
        with ProcessPoolExecutor(len(todo), mp_context=multiprocessing.get_context("spawn")) as pool:
            seconds.update(zip(todo, pool.map(timed_demo, todo.values())))
    else:
        seconds.update({seed: timed_demo(config) for seed, config in todo.items()})
    runs = []
    for seed, out in outs.items():
        summary = json.loads((out / "eval" / "eval.json").read_text())
        runs.append((seed, seconds[seed][0], summary, configs[seed]))
        print(f"seed {seed}: {seconds[seed][0]:.0f} s ({seconds[seed][1]:.0f} CPU s), "
              f"AD episodes {window[0]}-{window[1]}: "
              f"{at(summary, 'AD', window):.3f}")

    first = runs[0][2]
    setting = (f"{len(first['tasks'])} held-out pairs x {first['seeds']} runs, 9x9, 50-step episodes, "
               f"context {runs[0][3].context}, subsample {runs[0][3].subsample}")
    span = f"episodes {window[0]}-{window[1]}"
    figures = []
    for seed, _, summary, _ in runs:
        ad, source = at(summary, "AD", window), at(summary, "source", window)
        figures.append(figure(f"AD return / optimal on held-out key/door pairs, in-context {span} (seed {seed}; "
                              f"reference: the source A2C's own {span} from scratch on the same pairs; {setting})",
                              "return / optimal", ad, source, ">= 0.8"))
        figures[-1]["per_policy"] = {name: {"first_5": at(summary, name, (1, 5)), span: at(summary, name, window)}
                                     for name in summary["policies"]}
    for seed, _, summary, _ in runs:
        ed_first, ed_last = at(summary, "ED", (1, 5)), at(summary, "ED", window)
        figures.append(figure(f"ED return / optimal, {span} vs episodes 1-5 (seed {seed}; flat: no in-context "
                              f"improvement)", "return / optimal", ed_last, ed_first, "~1x (flat)"))
    walls = [wall for _, wall, _, _ in runs]
    parallel = f"; the {len(runs)} seeds' demos ran at once" if args.parallel else ""
    figures.append({**figure(f"demo wall time, generate + train AD + train ED + evaluate ({setting}; 2 cores shared "
                             f"with other jobs{parallel})", "s", float(np.mean(walls)), None, "<= 1800 s on 2 cores",
                             higher_is_better=False),
                    "per_seed": [{"seed": s, "seconds": seconds[s][0], "cpu_seconds": seconds[s][1]}
                                 for s, *_ in runs]})
    cpu = [seconds[s][1] for s, *_ in runs]
    figures.append({**figure(f"demo CPU time of its process (load-independent; ~ its wall time on 2 idle cores) "
                             f"({setting})", "s", float(np.mean(cpu)), None, "<= 1800 s on 2 cores",
                             higher_is_better=False)})
    data = Path(args.out) / f"seed{args.seeds[0]}{'-quick' if args.quick else ''}" / "keydoor"
    context = runs[0][3].context
    steps = 20 if args.quick else args.speed_steps
    long_rate = train_speed(data, Path(args.out), context, steps, runs[0][3].threads)
    short_rate = train_speed(data, Path(args.out), DARKROOM_CONTEXT, steps, runs[0][3].threads)
    figures.append(figure(f"ad train rl optimiser steps/s (demo preset, batch 32, 1 thread), context {context} vs "
                          f"DarkRoom's {DARKROOM_CONTEXT} (same data, same run; 2 cores shared with other jobs)",
                          "steps/s", long_rate, short_rate, "cost of the longer context"))
    bench = "ad_keydoor"
    report(bench, figures, args.quick, page="keydoor")
    if not args.quick:
        plot(runs, RESULTS / f"{bench}.png", setting)


def timed_demo(config: KeyDoorDemoConfig) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one whole demo (1 torch thread, as ``ad demo`` runs), also
    written to ``<out>/bench_time.json``. On a shared machine the CPU time is the load-independent part: on idle
    cores the wall time is about that."""
    cpu = time.process_time()
    seconds, _ = timed(lambda: run_ad_demo(config))
    result = (seconds, time.process_time() - cpu)
    (Path(config.out) / TIME_FILE).write_text(json.dumps({"seconds": result[0], "cpu_seconds": result[1]}))
    return result


def recorded_time(out: Path) -> tuple[float, float] | None:
    """The (wall, CPU) seconds a finished demo in ``out`` recorded (``--keep`` reuses it), or None."""
    path = out / TIME_FILE
    if not (path.is_file() and (out / "eval" / "eval.json").is_file()):
        return None
    data = json.loads(path.read_text())
    return data["seconds"], data["cpu_seconds"]


def at(summary: dict, policy: str, window: tuple[int, int]) -> float:
    """Mean return / optimal of ``policy`` over in-context episodes ``window`` (1-based, inclusive)."""
    curve = summary["policies"][policy]["normalised"]
    return float(np.mean(curve[window[0] - 1:window[1]]))


def plot(runs, path: Path, setting: str) -> None:
    """Return / optimal per in-context episode, mean over seeds; the band spans the seeds' curves."""
    from ad.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    names = [n for n in ("AD", "ED", "source", "random") if n in runs[0][2]["policies"]]
    labels = {"source": "source A2C (its own first episodes)", "ED": "ED (expert distillation)"}
    for name in names:
        curves = np.stack([np.asarray(summary["policies"][name]["normalised"]) for _, _, summary, _ in runs])
        x = np.arange(1, curves.shape[1] + 1)
        ax.plot(x, curves.mean(0), label=labels.get(name, name), lw=2.2 if name == "AD" else 1.3)
        ax.fill_between(x, curves.min(0), curves.max(0), alpha=0.25)
    ax.axhline(1.0, color="k", ls="--", lw=0.8)
    ax.axhline(0.8, color="gray", ls=":", lw=0.8)
    ax.set_xlabel("episode (in context, held-out key/door pairs)")
    ax.set_ylabel("return / optimal return")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Dark Key-to-Door: AD vs ED and its source A2C\n{setting}\nseeds "
                 f"{', '.join(str(s) for s, *_ in runs)}; band: spread over seeds", fontsize=9)
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3)
    save_figure(fig, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(ARGS)
