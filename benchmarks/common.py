"""Helpers shared by the benchmark scripts: options (``--config`` / ``--print-config``), timing, the results table,
the JSON record.

Every figure written by :func:`report` carries, besides its measurement (``figure``, ``unit``, ``ours``,
``reference``, ``ratio``, ``goal``, ``command``, ``date``), the fields the headline page is generated from:
``current`` (the figure stands now), ``capability`` (the headline-page row it belongs to), ``page`` (the slug of its
experiment page, ``docs/experiments/<page>.md``), ``hardware`` and ``config`` (the ``configs/`` file it was run with,
or null). ``headline: true`` marks the one figure of a capability shown on ``BENCHMARKS.md``; a re-run keeps a
figure's headline marks (``headline``, ``short``, ``vs``, ``capability``, ``page``) when its name is unchanged.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parents[1]
# The experiment pages (docs/experiments/<slug>.md) a figure's `page` may name.
PAGES = ("history-store", "darkroom", "bandit", "keydoor", "language-format", "models-and-evaluation", "scale-out",
         "rlhf", "gridworld", "textworld", "math", "gym", "in-context-methods", "continuous", "metaworld",
         "reliability", "usability")
# Fields a re-run of a benchmark carries over from the figure of the same name in the file it replaces.
_KEPT = ("headline", "short", "vs", "capability", "page", "readme", "rank")
_config_file: str | None = None  # the --config file parse_args read, recorded by report()


def fail(message: str) -> None:
    """End with one ``error:`` line and exit status 2 (bad input), no traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse_args(parser: Any, argv: list[str] | None = None) -> Any:
    """Parse a benchmark's options with two more: ``--config FILE`` (YAML of option values, flags override it) and
    ``--print-config`` (print the resolved options as YAML in the format ``--config`` reads, and exit).

    Call it before any heavy import: it needs only argparse and PyYAML. Keys are the options' argparse names
    (``ad_steps`` for ``--ad-steps``); an unknown key or a file that is not a mapping ends with a one-line error.
    """
    global _config_file
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="YAML file of option values (the names printed by --print-config); flags override it")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved options as YAML (a file --config reads) and exit")
    args = parser.parse_args(argv)
    if args.config:
        parser.set_defaults(**_read_config(parser, args.config))
        args = parser.parse_args(argv)
        _config_file = _relative(args.config)
    if args.print_config:
        import yaml

        values = {k: _plain(v) for k, v in vars(args).items() if k not in ("config", "print_config")}
        print(yaml.safe_dump(values, sort_keys=False), end="")
        raise SystemExit(0)
    return args


def _read_config(parser: Any, path: str) -> dict[str, Any]:
    """The option values of a ``--config`` file, converted by each option's ``type``; an option's other long flags
    are its deprecated names (``add_argument("--learning-rate", "--lr")`` reads ``lr:`` too, with a note)."""
    import yaml

    file = Path(path)
    if not file.is_file():
        parser.error(f"--config {path}: no such file")
    try:
        values = yaml.safe_load(file.read_text())
    except yaml.YAMLError as err:
        parser.error(f"--config {path} is not valid YAML: {str(err).splitlines()[0]}")
    if not isinstance(values, dict):
        parser.error(f"--config {path} must hold a mapping of option names to values")
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help", "config", "print_config")}
    old_names = {flag[2:].replace("-", "_"): a.dest for a in actions.values() for flag in a.option_strings
                 if flag.startswith("--") and flag[2:].replace("-", "_") != a.dest}  # "--learning-rate", "--lr"
    for old in [k for k in values if k in old_names]:
        if old_names[old] in values:
            parser.error(f"--config {path}: {old} and {old_names[old]} name the same option; give only "
                         f"{old_names[old]}")
        print(f"note: {old} is deprecated; use {old_names[old]}", file=sys.stderr)
        values[old_names[old]] = values.pop(old)
    unknown = sorted(set(values) - set(actions))
    if unknown:
        parser.error(f"--config {path}: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(actions))}")
    for name, value in values.items():
        convert = actions[name].type
        if callable(convert) and isinstance(value, str):
            values[name] = convert(value)
        elif callable(convert) and isinstance(value, list):
            values[name] = [convert(v) if isinstance(v, str) else v for v in value]
    return values


def _plain(value: Any) -> Any:
    """A YAML-safe form of an option value (tuples as lists, paths as strings)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _relative(path: str) -> str:
    """``path`` relative to the repository root when it lies under it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return path


def lm_parser(description: str, quick_help: str) -> Any:
    """An argparse parser with the options every LM benchmark takes: ``--quick`` and ``--model``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--model", default="smollm2-135m", help="base LM (ad.lm.pretrained.load_base name or folder)")
    return parser


def resolve_dtype(name: str) -> Any:
    """The torch dtype of a ``--dtype`` value; ``auto``: bfloat16 on a GPU or on a CPU that multiplies it in hardware
    (AMX / AVX512-BF16), else float32."""
    import torch

    from ad.config.groups import cpu_has_fast_bfloat16

    if name == "auto":
        return torch.bfloat16 if torch.cuda.is_available() or cpu_has_fast_bfloat16() else torch.float32
    return getattr(torch, name)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def figure(name: str, unit: str, ours: float, reference: float | None, goal: str, higher_is_better: bool = True
           ) -> dict[str, Any]:
    """One benchmark figure; ratio = ours / reference (None without a reference)."""
    ratio = None if reference in (None, 0) else ours / reference
    return {"figure": name, "unit": unit, "ours": ours, "reference": reference, "ratio": ratio, "goal": goal,
            "higher_is_better": higher_is_better}


def demo_wall_time_figures(outs: list[Path], seeds: list[int], command: str, tag: str) -> list[dict[str, Any]]:
    """The whole demo's wall time (its ``timings.json``: every stage, this run; a demo read back keeps the time of
    the run that made it) against the 30-minute goal, where every seed's demo (``outs``) recorded one; ``command``
    names the demo in the figure (``ad demo --methods ad,dpt,ed``)."""
    from ad.demo import TIMINGS_FILE

    files = [out / TIMINGS_FILE for out in outs]
    if not all(f.is_file() for f in files):
        return []
    timings = [json.loads(f.read_text()) for f in files]
    seconds = [t["seconds"]["total"] for t in timings]
    threads = sorted({t.get("threads") for t in timings}, key=str)
    text = (f"wall time of one `{command}` ({tag}, --threads {'/'.join(map(str, threads))}, seeds "
            f"{', '.join(map(str, seeds))})")
    return [{**figure(text, "seconds", float(sum(seconds) / len(seconds)), None, "<= 1800 (30 minutes on 2 cores)",
                      higher_is_better=False),
             "per_seed": [{"seed": s, "ours": v, "stages": t["seconds"]} for s, v, t in zip(seeds, seconds, timings)]}]


def report(bench: str, figures: list[dict[str, Any]], quick: bool, *, capability: str | None = None,
           page: str | None = None, hardware: str | None = None, config: str | None = None,
           current: bool | None = None) -> Path:
    """Print the table and write benchmarks/results/<bench>.json (``<bench>_quick.json`` with ``quick``).

    Each figure gets ``command``, ``date`` and, unless it carries its own: ``capability`` and ``page`` (its
    headline-page row and experiment-page slug, None when not given), ``hardware`` (default: this machine, e.g.
    "2-core x86-64 CPU" or "1x NVIDIA H100 80GB HBM3"), ``config`` (default: the ``--config`` file
    :func:`parse_args` read) and ``current`` (default: True for a full run, False for ``--quick``). A full run keeps
    the headline marks of the figures of the same name in the file it replaces.
    """
    if page is not None and page not in PAGES:
        raise ValueError(f"page {page!r} is not an experiment page: {', '.join(PAGES)}")
    script = Path(sys.argv[0])  # the benchmark that ran (one script may write several <bench>.json files)
    script_name = script.name if script.suffix == ".py" and script.parent.name == "benchmarks" else f"{bench}.py"
    command = "python " + " ".join([f"benchmarks/{script_name}", *sys.argv[1:]])
    date = _dt.date.today().isoformat()
    out = RESULTS / f"{bench}{'_quick' if quick else ''}.json"
    previous = {} if quick or not out.exists() else {f.get("figure"): f for f in json.loads(out.read_text())}
    defaults = {"capability": capability, "page": page, "hardware": hardware or _hardware(),
                "config": config if config is not None else _config_file,
                "current": (not quick) if current is None else current}
    figures = [_finite_or_null(fig) for fig in figures]
    for fig in figures:
        fig.update(command=command, date=date)
        for key, value in defaults.items():
            fig.setdefault(key, value)
        old = previous.get(fig["figure"], {})
        for key in _KEPT:
            if key in old and fig.get(key) is None:
                fig[key] = old[key]
    print(f"\n{bench} ({'quick' if quick else 'full'}; {platform.processor() or platform.machine()}, "
          f"{_cores()} cores)")
    print("| figure | unit | ours | reference | ratio | goal |\n|---|---|---|---|---|---|")
    for fig in figures:
        ref = "-" if fig["reference"] is None else f"{fig['reference']:,.3g}"
        ratio = "-" if fig["ratio"] is None else f"{fig['ratio']:.2f}x"
        ours = "-" if fig["ours"] is None else f"{fig['ours']:,.3g}"
        print(f"| {fig['figure']} | {fig['unit']} | {ours} | {ref} | {ratio} | {fig['goal']} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2, allow_nan=False) + "\n")
    print(f"wrote {out}")
    return out


def earlier_seed_rows(bench: str, quick: bool, family_tag: str, seeds: list[int]) -> list[dict[str, Any]]:
    """The per-seed ``details`` that ``<bench>.json`` (``_quick`` with ``quick``) holds for ``family_tag`` from seeds
    other than ``seeds``: a run of some seeds merges them with its own before writing the means."""
    path = RESULTS / f"{bench}{'_quick' if quick else ''}.json"
    old = json.loads(path.read_text()) if path.is_file() else []
    return [f["details"] for f in old if f.get("family") == family_tag and "details" in f
            and f["details"]["seed"] not in seeds]


def figure_seed(fig: dict[str, Any]) -> int | None:
    """The seed a figure was measured on: its ``seed``, else the one its ``settings`` name (None where neither)."""
    seed = fig.get("seed", (fig.get("settings") or {}).get("seed"))
    return seed if isinstance(seed, int) else None


def earlier_seed_figures(bench: str, quick: bool, family_tag: str, seeds: list[int]) -> list[dict[str, Any]]:
    """The figures of ``family_tag`` in ``<bench>.json`` (``_quick`` with ``quick``) whose seed
    (:func:`figure_seed`) is not one of ``seeds``: a run of some seeds keeps those of the others
    (run one seed at a time, each adds its own). Each keeps the command and date that measured it in
    ``measured_with`` (:func:`report` stamps the current ones)."""
    path = RESULTS / f"{bench}{'_quick' if quick else ''}.json"
    old = json.loads(path.read_text()) if path.is_file() else []
    kept = [f for f in old if f.get("family") == family_tag and figure_seed(f) is not None
            and figure_seed(f) not in seeds]
    for f in kept:
        f.setdefault("measured_with", {"command": f.get("command"), "date": f.get("date")})
    return kept


def merge_report(bench: str, quick: bool, family_tag: str, figures: list[dict[str, Any]],
                 supersedes: tuple[str, ...] = (), **report_options: Any) -> None:
    """Write ``figures`` (each tagged ``family: family_tag``) through :func:`report`, keeping the other families'
    figures of ``<bench>.json`` as they were (those of ``supersedes`` marked ``current: false``; a headline among the
    new figures replaces theirs). ``report_options`` go to :func:`report`."""
    path = RESULTS / f"{bench}{'_quick' if quick else ''}.json"
    others = [f for f in json.loads(path.read_text()) if f.get("family") != family_tag] if path.exists() else []
    new_headline = not quick and any(f.get("headline") for f in figures)
    for fig in others:
        if not quick and fig.get("family") in supersedes:
            fig["current"] = False
        if new_headline or fig.get("current") is False:
            fig.pop("headline", None)
    for fig in figures:
        fig["family"] = family_tag
        if quick:  # a quick run is never a headline
            fig.pop("headline", None)
    report(bench, figures, quick, **report_options)
    written = json.loads(path.read_text())
    path.write_text(json.dumps(others + written, indent=2) + "\n")


def _finite_or_null(value: Any) -> Any:
    """``value`` with every non-finite float (a milestone no run reached, a ratio of nothing) as None, so the
    results JSON stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(v) for v in value]
    return value


def _hardware() -> str:
    """This machine in a few words: the GPU a benchmark used (when torch is loaded and sees one), else the CPU."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"
    return f"{_cores()}-core {platform.machine().replace('_', '-')} CPU"


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
