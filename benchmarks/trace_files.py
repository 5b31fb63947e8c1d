"""How many project files a tiny run of each `ad` verb executes (a measure of how far a reader must follow it).

Each verb runs in a fresh interpreter with `sys.settrace` (and `threading.settrace`) recording the file of every
code object that starts executing, module bodies included; the count is the number of distinct files under the
checkout's `ad/`, `tasks/` and `models/`. Inputs a verb needs (a dataset, a checkpoint, a tiny LM) are made
first, untraced, by the same checkout. Child processes (Ray, DDP) are not traced; the tiny runs start none.

    python benchmarks/trace_files.py                              # this checkout
    python benchmarks/trace_files.py --repo PATH --before BASE    # PATH (after) next to BASE (before)

With `--before`, the figure is written through `report()`: ours = after, reference = before. `--quick` traces
the four in-context verbs only (generate darkroom, train rl, eval, demo); the LM verbs take longer.
It also prints the lines of Python under `ad/`, `tasks/`, `models/` of each checkout.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402

PACKAGES = ("ad", "tasks", "models")
IN_CONTEXT = ("generate darkroom", "train rl", "eval", "demo")
LM_VERBS = ("generate textworld", "generate math")

#: The traced process: put the checkout first on the path, trace, run the CLI, write the executed files.
TRACER = textwrap.dedent("""
    import json, sys, threading
    repo, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.path.insert(0, repo)
    files = set()
    def tracer(frame, event, arg):
        files.add(frame.f_code.co_filename)
        return None
    threading.settrace(tracer)
    sys.settrace(tracer)
    code = 1
    try:
        from ad import cli
        code = cli.run(argv)
    finally:
        sys.settrace(None)
        threading.settrace(None)
        with open(out, "w") as fh:
            json.dump({"code": code, "files": sorted(files)}, fh)
""")

#: Untraced preparation: a tiny random LM saved as a local model folder, built by this script's own checkout.
TINY_LM = textwrap.dedent("""
    import sys
    try:
        from benchmarks.helpers.tiny_lm import build_tiny
    except ImportError:  # a checkout from before the test helpers left the installed packages
        from models.lm.tiny import build_tiny
    build_tiny(sys.argv[1], n_layer=1, width=32, max_positions=1024)
""")
HERE = Path(__file__).resolve().parents[1]

QUIET = ["--progress", "false"]
DEMO_CONFIG = {"size": 5, "seed": 1, "streams": 10, "steps_per_goal": 2000, "ad_steps": 3, "ed_steps": 2,
               "episodes": 4, "seeds": 1,
               "train_overrides": {"n_embd": 16, "n_head": 2, "n_ff": 32, "warmup_steps": 1, "progress": False,
                                   "batch_size": 2}}


def verbs(work: Path) -> dict[str, dict[str, Any]]:
    """Each verb: the untraced commands that prepare its inputs and the traced command line (all tiny)."""
    data, ckpt, lm = work / "data", work / "ckpt", work / "tiny-lm"
    generate = ["generate", "darkroom", "--size", "3", "--steps-per-goal", "400", "--hidden", "16", "--threads", "1"]
    train = ["train", "rl", "--data", str(data), "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--n-ff", "32",
             "--context", "20", "--batch-size", "4", "--max-steps", "6", "--val-every", "3", "--val-batches", "2",
             "--threads", "1"]
    return {
        "generate darkroom": {"prepare": [], "argv": [*generate, "--out", str(work / "traced-data")]},
        "train rl": {"prepare": [[*generate, *QUIET, "--out", str(data)]], "argv": [*train, "--out", str(work / "run")]},
        "eval": {"prepare": [[*generate, *QUIET, "--out", str(data)], [*train, *QUIET, "--out", str(ckpt)]],
                 "argv": ["eval", "--ckpt", str(ckpt), "--data", str(data), "--episodes", "2", "--seeds", "1",
                          "--threads", "1", "--out", str(work / "eval")]},
        "demo": {"prepare": [], "config": DEMO_CONFIG,
                 "argv": ["demo", "--config", str(work / "demo.yaml"), "--out", str(work / "demo")]},
        "generate textworld": {"prepare": ["tiny-lm"], "argv": [
            "generate", "textworld", "--model", str(lm), "--out", str(work / "tw"), "--eval-games", "1",
            "--sft-games", "2", "--sft-epochs", "1", "--sft-batch-size", "4", "--ppo-iterations", "1",
            "--ppo-games", "1", "--ppo-epochs", "1", "--ppo-batch-size", "4", "--step-limit", "3", "--history", "1",
            "--max-prompt-tokens", "96", "--lora-r", "2", "--threads", "1"]},
        # --iterations: max-steps' deprecated name, the only one the before checkout knows
        "generate math": {"prepare": ["tiny-lm"], "argv": [
            "generate", "math", "--model", str(lm), "--out", str(work / "math"), "--iterations", "3",
            "--chunk-steps", "2", "--num-generations", "2", "--problems-per-step", "2", "--max-new-tokens", "6",
            "--eval-problems", "4", "--threads", "1", "--train-problems", "20", "--ref-refresh", "2"]},
    }


#: checkout -> extra import path for its processes (``--before-path``)
EXTRA_PATH: dict[Path, str] = {}


def _python(repo: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(repo), EXTRA_PATH.get(repo, "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)


def trace(repo: Path, verb: str, work: Path) -> list[str]:
    """The project files (relative to ``repo``) that one tiny run of ``verb`` executes."""
    spec = verbs(work)[verb]
    for step in spec["prepare"]:
        if step == "tiny-lm":
            if not (work / "tiny-lm").is_dir():
                _check(_python(HERE, ["-c", TINY_LM, str(work / "tiny-lm")], work), f"{verb}: tiny LM")
        elif not Path(step[step.index("--out") + 1]).is_dir():
            _check(_python(repo, ["-m", "ad", *step], work), f"{verb}: {' '.join(step[:2])}")
    if "config" in spec:
        (work / "demo.yaml").write_text(json.dumps(spec["config"]))  # JSON is YAML
    out = work / f"trace-{verb.replace(' ', '-')}.json"
    proc = _python(repo, ["-c", TRACER, str(repo), str(out), *spec["argv"]], work)
    _check(proc, verb)
    result = json.loads(out.read_text())
    if result["code"] != 0:
        raise SystemExit(f"{verb} exited {result['code']} in {repo}:\n{proc.stderr[-3000:]}")
    roots = [repo.resolve() / p for p in PACKAGES]
    return sorted({str(Path(f).resolve().relative_to(repo.resolve())) for f in result["files"]
                   if any(Path(f).resolve().is_relative_to(r) for r in roots)})


def _check(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def lines_of_code(repo: Path) -> dict[str, int]:
    """Lines in the ``.py`` files of each package."""
    return {p: sum(len(f.read_text().splitlines()) for f in (repo / p).rglob("*.py")) for p in PACKAGES}


def count(repo: Path, names: list[str]) -> dict[str, list[str]]:
    """Executed project files per verb for one checkout (a fresh scratch folder per checkout)."""
    with tempfile.TemporaryDirectory(prefix="trace-files-") as tmp:
        return {verb: trace(repo, verb, Path(tmp)) for verb in names}


def main(argv: list[str] | None = None) -> None:
    """Trace each verb in ``--repo`` (and ``--before``), print the counts, write the figure with ``--before``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE, help="checkout to trace")
    parser.add_argument("--before", type=Path, help="another checkout (the reference) traced the same way")
    parser.add_argument("--before-path", default="",
                        help="folder put on the before checkout's import path after it: a copy of the distribution's "
                             "dist-info with that checkout's entry points, where they differ from the installed ones")
    parser.add_argument("--quick", action="store_true", help="trace the four in-context verbs only")
    parser.add_argument("--verbs", nargs="+", help="trace only these verbs, e.g. 'train rl' eval")
    parser.add_argument("--list", action="store_true", help="also print every executed file")
    args = parse_args(parser, argv)
    names = args.verbs or list(IN_CONTEXT if args.quick else IN_CONTEXT + LM_VERBS)
    if args.before and args.before_path:
        EXTRA_PATH[args.before] = args.before_path
    after = count(args.repo, names)
    before = count(args.before, names) if args.before else None
    for verb in names:
        line = f"{verb:20s} {len(after[verb]):4d} files"
        if before is not None:
            line += f"   before {len(before[verb]):4d}   ratio {len(after[verb]) / len(before[verb]):.2f}x"
        print(line)
        if args.list:
            print(textwrap.indent("\n".join(after[verb]), "    "))
    for label, repo in [("after", args.repo)] + ([("before", args.before)] if args.before else []):
        loc = lines_of_code(repo)
        print(f"lines ({label}): " + ", ".join(f"{p}/ {n}" for p, n in loc.items()) + f", total {sum(loc.values())}")
    if before is None:
        return
    figures = []
    for verb in names:
        goal = "<= 0.67x" if verb in IN_CONTEXT else "< 1x"
        figures.append(figure(f"project files executed by a tiny `ad {verb}`", "files", len(after[verb]),
                              len(before[verb]), goal, higher_is_better=False))
    worst = max((f for f in figures if f["figure"].split("`ad ")[1].rstrip("`") in IN_CONTEXT),
                key=lambda f: f["ratio"], default=None)
    if worst is not None and not args.quick:  # the headline: the in-context verb that improved least
        worst.update(headline=True, short=f"project files a tiny {worst['figure'].split('tiny ')[1]} executes, "
                                          "the in-context verb that improved least", vs="before the redesign")
    report("trace_files", figures, args.quick, capability="Command paths a contributor reads", page="usability",
           config=None if args.quick else "configs/usability/trace_files.yaml")


if __name__ == "__main__":
    main()
