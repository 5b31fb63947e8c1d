"""Reliability table (issue #19): bad inputs tried as a new user would, and faults injected into `ad generate`.

Each bad input runs `python -m ad ...` in a fresh process (as a user would) and counts as handled when the
command exits with code 2, prints exactly one `error:` line and no traceback, and leaves what was on disk
before as it was (every file's bytes; a run that fails after it started, e.g. by diverging, may leave a new
dataset folder that holds no committed unit, which the corrected command then replaces). Faults: `ad generate` SIGKILLed at
random moments and resumed (DuckDB and polars read the dataset through the README's glob while each run is in
progress and after each kill), a truncated shard and a deleted shard repaired by re-running the command.
The reference of each count is the number tried, so `ratio` 1.0 means every case was handled.

    python benchmarks/reliability.py            # 10 kills on 3x3 histories of 40k steps
    python benchmarks/reliability.py --quick    # 5 kills on 3x3 histories of 20k steps (~4 min)

Run folders (:mod:`benchmarks.reliability_runs`): `ad eval` and `ad train rl --resume` SIGKILLed at random moments
(run files lost, --resume with other options going on, tracebacks) and two trainers started on one --out together.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import figure, parse_args, report  # noqa: E402


def options() -> argparse.Namespace:
    """The options (``--config`` / ``--print-config`` answered here, before the heavy imports below)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 kills, 20k-step histories, 1 + 1 run-folder kills, "
                                                            "1 trainer pair (~4 min)")
    return parse_args(parser)


ARGS = options() if __name__ == "__main__" else None

from ad.history import HistoryReader, content_hash  # noqa: E402
from benchmarks.reliability_runs import concurrent_trainers, run_file_kills  # noqa: E402
from benchmarks.scale_generate import ad_command, kill_and_resume, read_with_globs, transition_diff  # noqa: E402


TINY = ["--size", "3", "--hidden", "16", "--progress", "false", "--plots", "false", "--tensorboard", "false"]


def _tree_digest(path: Path) -> str:
    """Digest of every file under ``path`` (names and bytes; not the writer's lock file, which holds the pid of
    the last writer): equal iff nothing was written or changed."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and p.name != ".lock") if path.exists() else []:
        digest.update(str(file.relative_to(path)).encode() + file.read_bytes())
    return digest.hexdigest()


def _ad(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(ad_command(*args), capture_output=True, text=True, timeout=600)


def _handled(result: subprocess.CompletedProcess) -> bool:
    lines = [l for l in result.stderr.splitlines() if l.strip() and not l.startswith(("usage:", " ", "repairing "))]
    return result.returncode == 2 and "Traceback" not in result.stderr and len(lines) == 1 and "error:" in lines[0]


def bad_input_cases(work: Path) -> list[tuple[str, Callable[[], list[str]]]]:
    """(name, set-up returning the argv) of each bad input; the set-up may write files the case must not change."""
    data = work / "data"
    if not data.exists():
        _ad("generate", "darkroom", "--out", str(data), *TINY, "--steps-per-goal", "2000", "--goals", "0,0", "2,2",
            "0,2", "2,0")
    afile = work / "afile"
    afile.write_text("keep")

    def config(text: str) -> str:
        path = work / f"config-{hashlib.md5(text.encode()).hexdigest()[:8]}.yaml"
        path.write_text(text)
        return str(path)

    def copy_with(edit: Callable[[Path], None]) -> str:
        target = work / f"copy-{len(list(work.glob('copy-*')))}"
        shutil.copytree(data, target)
        edit(target)
        return str(target)

    def bad_json(text: str) -> Callable[[Path], None]:
        return lambda d: (d / "dataset.json").write_text(text)

    def wrong_type(d: Path) -> None:
        meta = json.loads((d / "dataset.json").read_text())
        next(iter(meta["units"].values()))["files"] = "part-00000.parquet"
        (d / "dataset.json").write_text(json.dumps(meta))

    def corrupt_ckpt() -> str:
        folder = work / "ckpt" / "model"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text('{"model_type": "ad-rl", ')
        return str(work / "ckpt")

    gen = ["generate", "darkroom", *TINY, "--steps-per-goal", "2000", "--goals", "0,0"]
    sizeless = [a for i, a in enumerate(gen) if a != "--size" and (i == 0 or gen[i - 1] != "--size")]
    new = lambda: str(work / f"new-{time.monotonic_ns()}")  # noqa: E731 -- an --out that must stay absent
    cases: list[tuple[str, Callable[[], list[str]]]] = [
        (f"generate {flag} {value}", lambda flag=flag, value=value: [*gen, f"{flag}={value}", "--out", new()])
        for flag in ("--learning-rate", "--ent-coef", "--vf-coef", "--gamma", "--max-grad-norm", "--heldout-fraction")
        for value in ("nan", "inf", "-inf")]
    cases += [
        ("generate --learning-rate 1e30 (diverges mid-run)", lambda: [*gen, "--learning-rate", "1e30", "--out", new()]),
        ("generate --size 100000", lambda: [*gen[:2], "--size", "100000", "--out", new()]),
        ("generate --goals on the start cell", lambda: [*gen, "--goals", "1,1", "--out", new()]),
        ("generate --steps-per-goal 0", lambda: [*gen, "--steps-per-goal", "0", "--out", new()]),
        ("generate --preset nope", lambda: [*gen, "--preset", "nope", "--out", new()]),
        ("config size: nine", lambda: [*sizeless, "--config", config("size: nine\n"), "--out", new()]),
        ("config size: 9.7", lambda: [*sizeless, "--config", config("size: 9.7\n"), "--out", new()]),
        ("config size: true", lambda: [*sizeless, "--config", config("size: true\n"), "--out", new()]),
        ("config learning_rate: .inf", lambda: [*gen, "--config", config("learning_rate: .inf\n"), "--out", new()]),
        ("train config max_steps: 1.5", lambda: ["train", "rl", "--data", str(data), "--config",
                                                 config("max_steps: 1.5\n"), "--out", new()]),
        ("generate --out is a file", lambda: [*gen, "--out", str(afile)]),
        ("train rl --out is a file", lambda: ["train", "rl", "--data", str(data), "--out", str(afile)]),
        ("eval --out is a file", lambda: ["eval", "--data", str(data), "--out", str(afile)]),
        ("train rl --out is the dataset", lambda: ["train", "rl", "--data", str(data), "--out", str(data)]),
        ("generate into another run's dataset with other settings",
         lambda: ["generate", "darkroom", *TINY, "--steps-per-goal", "2000", "--goals", "0,0", "2,2", "0,2", "2,0",
                  "--learning-rate", "0.5", "--out", str(data)]),
        ("inspect: dataset.json not JSON", lambda: ["inspect", copy_with(bad_json("{oops"))]),
        ("inspect: dataset.json a list", lambda: ["inspect", copy_with(bad_json("[]"))]),
        ("inspect: dataset.json wrongly typed field", lambda: ["inspect", copy_with(wrong_type)]),
        ("eval --max-tasks 0", lambda: ["eval", "--data", str(data), "--max-tasks", "0"]),
        ("eval: corrupt checkpoint config", lambda: ["eval", "--data", str(data), "--ckpt", corrupt_ckpt(),
                                                     "--split", "train"]),
        ("eval --ckpt holds no checkpoint", lambda: ["eval", "--data", str(data), "--ckpt", str(work)]),
        ("unknown generate target", lambda: ["generate", "nope"]),
    ]
    return cases


def _nothing_committed(work: Path, before: str, argv: list[str]) -> bool:
    """Nothing changed on disk, or (a run that failed after it started) a new --out holds no committed unit."""
    if _tree_digest(work) == before:
        return True
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    return out is not None and out.name.startswith("new-") and HistoryReader(out).units() == []


def run_bad_inputs(work: Path) -> tuple[int, list[str]]:
    """(cases handled, names of the cases that were not)."""
    return run_cases(work, bad_input_cases(work))


def size_and_text_cases(work: Path) -> dict[str, list[tuple[str, Callable[[], list[str]]]]]:
    """The classes "bounded sizes" (sizes beyond this machine's memory, seeds outside 0..2^31-1, a math question
    longer than the model's context) and "non-UTF-8 inputs" (bytes that are not UTF-8 in a --config, --problems or
    --prompts file and in an --out path): (name, set-up returning the argv) of each case."""
    data = work / "data"  # the darkroom dataset of bad_input_cases
    new = lambda: str(work / f"new-{time.monotonic_ns()}")  # noqa: E731 -- an --out that must stay absent

    def file(name: str, content: bytes) -> str:
        path = work / name
        path.write_bytes(content)
        return str(path)

    def long_question() -> list[str]:
        from benchmarks.helpers.tiny_lm import build_tiny

        model = work / "tiny-lm"
        if not model.exists():
            build_tiny(model, n_layer=1, width=32)  # one token per character, 512 positions
        rows = [{"question": "What is 2 + 2?", "answer": "#### 4"}, {"question": "x" * 50_000_000, "answer": "#### 1"},
                {"question": "What is 3 + 3?", "answer": "#### 6"}]
        problems = file("long.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
        return ["generate", "math", "--problems", problems, "--model", str(model), "--threads", "1", "--out", new()]

    gen = ["generate", "darkroom", *TINY, "--steps-per-goal", "2000", "--goals", "0,0"]
    problem = b'{"question": "What is 2 + 2?", "answer": "#### 4"}\n'
    sizes: list[tuple[str, Callable[[], list[str]]]] = [
        ("generate bandit --pulls 1000000000", lambda: ["generate", "bandit", "--pulls", "1000000000", "--out", new()]),
        ("generate gridworld --size 100000", lambda: ["generate", "gridworld", "--size", "100000", "--out", new()]),
        *[(f"train rl {flag} {value}", lambda flag=flag, value=value: [
            "train", "rl", "--data", str(data), flag, value, "--out", new()])
          for flag, value in (("--batch-size", "100000000"), ("--n-layer", "100000"), ("--n-embd", "1000000"))],
        *[(f"eval {flag} {value}", lambda flag=flag, value=value: [
            "eval", "--data", str(data), "--split", "all", flag, value, "--out", new()])
          for flag, value in (("--seeds", "100000000"), ("--episodes", "1000000000"))],
        ("generate math: a 50 MB question", long_question),
        *[(f"generate --seed {seed}", lambda seed=seed: [*gen, "--seed", seed, "--out", new()])
          for seed in ("-1", "2147483648", "12345678901234567890123")],
    ]
    text: list[tuple[str, Callable[[], list[str]]]] = [
        ("--config file", lambda: [*gen, "--config", file("latin1.yaml", b"learning_rate: 0.001\nout: caf\xe9\n")]),
        ("--problems file", lambda: ["generate", "math", "--problems",
                                     file("latin1.jsonl", problem + b'{"question": "caf\xe9?", "answer": "#### 1"}\n'),
                                     "--out", new()]),
        ("--prompts file", lambda: ["generate", "rlhf", "--prompts", file("latin1.txt", b"a poem\ncaf\xe9s\n"),
                                    "--out", new()]),
        ("--out path", lambda: [*gen, "--out", os.fsdecode(os.fsencode(str(work)) + b"/caf\xe9")]),
    ]
    return {"bounded sizes": sizes, "non-UTF-8 inputs": text}


def run_cases(work: Path, cases: list[tuple[str, Callable[[], list[str]]]]) -> tuple[int, list[str]]:
    """(cases handled: exit 2, one error line, nothing changed on disk; names of the cases that were not)."""
    failed = []
    for name, setup in cases:
        argv = setup()
        before = _tree_digest(work)
        result = _ad(*argv)
        if not _handled(result) or not _nothing_committed(work, before, argv):
            failed.append(f"{name}: exit {result.returncode}: {result.stderr.strip()[-300:]}")
    return len(cases) - len(failed), failed


def run_repairs(work: Path, steps: int) -> dict[str, Any]:
    """Truncate one shard and delete another, re-run the same command: is the dataset as before?"""
    argv = ["generate", "darkroom", "--out", str(work / "repair"), *TINY, "--steps-per-goal", str(steps)]
    _ad(*argv)
    reference = content_hash(work / "repair")
    shards = sorted((work / "repair").glob("task=*/run=*/*.parquet"))
    with open(shards[0], "r+b") as fh:
        fh.truncate(shards[0].stat().st_size // 2)
    shards[3].unlink()
    result = _ad(*argv)
    return {"faults": 2, "repaired": int(result.returncode == 0 and content_hash(work / "repair") == reference)
            * 2}


def main(args: argparse.Namespace) -> None:
    kills, steps = (5, 20_000) if args.quick else (10, 40_000)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        handled, failed = run_bad_inputs(work / "bad")
        tried = handled + len(failed)
        for line in failed:
            print("NOT HANDLED:", line)
        classes = {name: run_cases(work / "bad", cases) for name, cases in size_and_text_cases(work / "bad").items()}
        for name, (_, not_handled) in classes.items():
            for line in not_handled:
                print(f"NOT HANDLED ({name}):", line)
        repairs = run_repairs(work, 2000)
        argv = ad_command("generate", "darkroom", *TINY, "--steps-per-goal", str(steps), "--goals-per-batch", "1")
        subprocess.run([*argv, "--out", str(work / "ref")], check=True, capture_output=True)
        unit_seconds = statistics.median(u["info"]["batch_seconds"] for u in HistoryReader(work / "ref").units())
        stats = kill_and_resume([*argv, "--out", str(work / "killed")], work / "killed", total_units=8, kills=kills,
                                unit_seconds=unit_seconds, seed=1, probe=read_with_globs)
        for line in stats["probe_errors"]:
            print("GLOB READ FAILED:", line)
        lost, duplicated = transition_diff(work / "ref", work / "killed")
        same_hash = content_hash(work / "ref") == content_hash(work / "killed")
        runs_data = work / "runs-data"  # run folders: eval / train files under kill -9, two trainers at once
        _ad("generate", "darkroom", "--out", str(runs_data), *TINY, "--steps-per-goal", "2000", "--heldout-fraction",
            "0.25")
        run_kills = 1 if args.quick else 5
        killed_runs = run_file_kills(work / "kills", runs_data, run_kills)
        pairs = concurrent_trainers(work / "pairs", runs_data, 1 if args.quick else 3, resume_pairs=not args.quick)
        for line in killed_runs["details"] + pairs["details"]:
            print("RUN FOLDER:", line)
    figures = [figure(f"{name}: answered with exit 2, one error line, nothing changed on disk", "cases", ok,
                      ok + len(not_handled), "all") for name, (ok, not_handled) in classes.items()] + [
        figure("bad inputs answered with exit 2, one error line, nothing changed on disk", "cases", handled, tried,
               "all"),
        figure("faults repaired by re-running the same command (truncated shard, deleted shard)", "faults",
               repairs["repaired"], repairs["faults"], "all"),
        figure("SIGKILLs of `ad generate` at random moments, each resumed", "kills", stats["killed"], kills, "all"),
        figure("DuckDB + polars glob reads during runs and after kills that failed", "reads",
               stats["probe_failures"], stats["probe_reads"], "0", higher_is_better=False),
        figure("transitions lost after the kills (vs an uninterrupted run)", "transitions", lost, None, "0",
               higher_is_better=False),
        figure("transitions duplicated after the kills", "transitions", duplicated, None, "0",
               higher_is_better=False),
        figure("resumed dataset's content hash equals the uninterrupted run's", "bool", int(same_hash), None, "1"),
        figure("run-file atomicity under kill -9: `ad eval` and `ad train rl --resume` killed at random moments",
               "kills", killed_runs["kills"], 2 * run_kills, "all"),
        figure("run files (eval.json/csv/png, config.yaml, model/) lost after those kills", "files",
               killed_runs["lost"], None, "0", higher_is_better=False),
        figure("`--resume` with other options going on after a killed training (silently wrong)", "runs",
               killed_runs["silently_wrong"], None, "0", higher_is_better=False),
        figure("tracebacks after those kills", "commands", killed_runs["tracebacks"], None, "0",
               higher_is_better=False),
        figure("concurrent trainers: pairs on one --out (fresh and --resume) where one ran and one got an error line",
               "pairs", pairs["one_writer"], pairs["pairs"], "all"),
        figure("concurrent trainers silently wrong (both ran, or a second set of checkpoints / event files)", "pairs",
               pairs["silently_wrong"], None, "0", higher_is_better=False),
        figure("concurrent trainers: tracebacks", "commands", pairs["tracebacks"], None, "0",
               higher_is_better=False),
    ]
    report("reliability", figures, args.quick, page="reliability")


if __name__ == "__main__":
    main(ARGS)
