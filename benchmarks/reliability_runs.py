"""Reliability of run folders (part of ``benchmarks/reliability.py``): run files under kill -9, concurrent trainers.

Run-file atomicity: `ad eval` and `ad train rl --resume` are SIGKILLed at random moments of their run (the moments
drawn over the measured length of an uninterrupted one, weighted to its end, where the files are written). After
each kill every run file that was complete before must still read (eval.json, eval.csv, in_context.png,
config.yaml, model/): a file that no longer does is *lost*. A `--resume` with other options after a killed
training must be refused (exit 2): going on is *silently wrong*. A command that ends in a Python traceback
counts under *tracebacks*.

Concurrent trainers: two `ad train rl` (or two `--resume`) on one `--out` started at the same moment: one must
run and the other exit 2 with one `error:` line; both exiting 0, or a second set of checkpoints / event files,
is *silently wrong*.
"""
from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.scale_generate import ad_command

TINY_TRAIN = ["--context", "20", "--batch-size", "4", "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
              "--n-ff", "32", "--warmup-steps", "1", "--val-every", "0", "--progress", "false", "--threads", "1",
              "--checkpoint-every", "5"]


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(ad_command(*argv), capture_output=True, text=True, timeout=600)


def _one_error_line(stderr: str) -> bool:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("error:")


def _readable(folder: Path) -> list[str]:
    """Names of the run files under ``folder`` that do not read whole (empty, truncated, not parseable)."""
    bad = []
    checks = {"eval/eval.json": lambda p: json.loads(p.read_text())["policies"],
              "eval/eval.csv": lambda p: p.read_text().splitlines()[1],
              "eval/in_context.png": lambda p: p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" or 1 / 0,
              "config.yaml": lambda p: yaml.safe_load(p.read_text())["data"],
              "model/config.json": lambda p: json.loads(p.read_text())["model_type"],
              "model/model.safetensors": lambda p: p.stat().st_size > 1000 or 1 / 0}
    for name, check in checks.items():
        path = folder / name
        if not path.exists():
            continue
        try:
            check(path)
        except Exception:  # noqa: BLE001 - any failure to read it back is a lost file
            bad.append(name)
    return bad


def _kill_at(argv: list[str], delay: float) -> str:
    """Start ``ad argv``, SIGKILL it after ``delay`` seconds (if still running); its stderr."""
    proc = subprocess.Popen(ad_command(*argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return proc.stderr.read()


def run_file_kills(work: Path, data: Path, kills: int, seed: int = 0) -> dict[str, Any]:
    """SIGKILL `ad eval` and `ad train rl --resume` ``kills`` times each; count lost files, silently wrong
    resumes and tracebacks."""
    rng = random.Random(seed)
    run = work / "run"
    assert _run(["train", "rl", "--data", str(data), "--out", str(run), *TINY_TRAIN, "--max-steps", "10"]
                ).returncode == 0
    eval_argv = ["eval", "--ckpt", str(run), "--data", str(data), "--episodes", "20", "--seeds", "2",
                 "--progress", "false", "--out", str(run / "eval")]
    started = time.monotonic()
    assert _run(eval_argv).returncode == 0
    eval_seconds = time.monotonic() - started
    counts = {"kills": 0, "lost": 0, "silently_wrong": 0, "tracebacks": 0, "details": []}
    for i in range(kills):  # ad eval killed while (re)writing eval.json / eval.csv / in_context.png
        stderr = _kill_at(eval_argv, eval_seconds * rng.uniform(0.5, 1.1))
        counts["kills"] += 1
        counts["tracebacks"] += "Traceback" in stderr
        lost = _readable(run)
        counts["lost"] += len(lost)
        counts["details"] += [f"eval kill {i}: lost {name}" for name in lost]
    resume = ["train", "rl", "--data", str(data), "--out", str(run), *TINY_TRAIN, "--resume"]
    steps = 10
    for i in range(kills):  # ad train rl --resume killed, from start-up to its last writes
        steps += 5
        started = time.monotonic()
        stderr = _kill_at([*resume, "--max-steps", str(steps)], 12.0 * rng.uniform(0.1, 1.2))
        seconds = time.monotonic() - started
        counts["kills"] += 1
        counts["tracebacks"] += "Traceback" in stderr
        lost = _readable(run)
        counts["lost"] += len(lost)
        counts["details"] += [f"train kill {i} after {seconds:.1f}s: lost {name}" for name in lost]
        other = _run([*resume, "--max-steps", str(steps), "--batch-size", "8", "--learning-rate", "0.05",
                      "--expert-only"])
        if other.returncode != 2 or not _one_error_line(other.stderr):
            counts["silently_wrong"] += 1
            counts["details"].append(f"train kill {i}: --resume with other options exited {other.returncode}")
        again = _run([*resume, "--max-steps", str(steps)])  # the same command repairs what the kill left
        counts["tracebacks"] += "Traceback" in other.stderr + again.stderr
        if again.returncode != 0:
            counts["lost"] += 1
            counts["details"].append(f"train kill {i}: the same --resume exited {again.returncode}: "
                                     f"{again.stderr.strip()[-200:]}")
    return counts


def concurrent_trainers(work: Path, data: Path, trials: int, resume_pairs: bool = True) -> dict[str, Any]:
    """``trials`` pairs of `ad train rl` on one fresh --out (and with ``resume_pairs`` ``trials`` pairs of
    `--resume` on one run), each pair started together; count pairs where exactly one ran and the other was
    refused in one line."""
    counts = {"pairs": 0, "one_writer": 0, "silently_wrong": 0, "tracebacks": 0, "details": []}
    for i in range(trials):
        for resume in (False, True) if resume_pairs else (False,):
            out = work / f"pair-{i}-{int(resume)}"
            base = ["train", "rl", "--data", str(data), "--out", str(out), *TINY_TRAIN]
            if resume:
                assert _run([*base, "--max-steps", "5"]).returncode == 0
            argv = [*base, "--max-steps", "25", *(["--resume"] if resume else [])]
            procs = [subprocess.Popen(ad_command(*argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True) for _ in range(2)]
            results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
            counts["pairs"] += 1
            counts["tracebacks"] += sum("Traceback" in err for _, err in results)
            codes = sorted(code for code, _ in results)
            extra = [p.name for p in (out / "checkpoints").glob("last-v*.ckpt")]
            events = list((out / "tb").rglob("events.out.tfevents.*"))
            refused = next((err for code, err in results if code == 2), "")
            if codes == [0, 2] and _one_error_line(refused) and not extra and len(events) == 1 + resume:
                counts["one_writer"] += 1
            else:
                counts["silently_wrong"] += 1
                counts["details"].append(f"pair {i} resume={resume}: exits {codes}, extra {extra}, "
                                         f"{len(events)} event files")
            shutil.rmtree(out, ignore_errors=True)
    return counts
