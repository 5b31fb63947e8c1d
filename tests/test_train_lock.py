"""One writer per training run folder (the lock `ad generate` takes on a dataset), and Ctrl-C in training says how
to go on: `ad train rl` / `ad train lm`, fresh or with --resume."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ad import cli

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
       "OMP_NUM_THREADS": "1"}
TINY_DATA = ["--size", "3", "--steps-per-goal", "2000", "--hidden", "16", "--progress", "false", "--plots", "false",
             "--tensorboard", "false"]
TRAIN = {"rl": ["--context", "20", "--batch-size", "4", "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
                "--n-ff", "32", "--warmup-steps", "1", "--val-every", "0", "--progress", "false", "--threads", "1"],
         "lm": ["--preset", "scratch", "--context", "12", "--max-tokens", "48", "--batch-size", "4", "--warmup-steps",
                "1", "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--n-ff", "32", "--val-every", "0",
                "--progress", "false", "--threads", "1", "--subsample", "1", "--watch-every", "0"]}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lock") / "d"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "darkroom", "--out", str(out), *TINY_DATA, "--heldout-fraction", "0.25"])
    assert exit_info.value.code == 0
    return out


def argv(kind: str, data: Path, out: Path, *extra: str) -> list[str]:
    return ["train", kind, "--data", str(data), "--out", str(out), *TRAIN[kind], *extra]


def run_cli(capsys, args: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    return exit_info.value.code, capsys.readouterr().err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("kind,resume", [("rl", False), ("rl", True), ("lm", False)])
def test_a_second_trainer_on_one_run_folder_gets_one_error_line(data, tmp_path, capsys, kind, resume):
    out = tmp_path / "run"
    if resume:
        assert run_cli(capsys, argv(kind, data, out, "--max-steps", "2"))[0] == 0
    listing = sorted(p.name for p in out.rglob("*")) if out.exists() else []
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from ad.history import Location
        from ad.history.lock import DatasetLock
        lock = DatasetLock.acquire(Location.of({str(out)!r}))
        print("locked", flush=True)
        time.sleep(120)
        """)], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout.readline().strip() == "locked"
        extra = ["--max-steps", "4", *(["--resume"] if resume else [])]
        code, err = run_cli(capsys, argv(kind, data, out, *extra))
        line = one_error_line(err)
        assert code == 2 and f"pid {holder.pid}" in line and "is writing" in line and "--resume" in line
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in out.rglob("*") if p.name != ".lock") == [n for n in listing if n != ".lock"]
    if kind == "rl":  # the lock died with its process: the same command now runs
        assert run_cli(capsys, argv(kind, data, out, "--max-steps", "4", *(["--resume"] if resume else [])))[0] == 0


@pytest.mark.slow
def test_two_trainers_started_together_leave_one_run(data, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "ad", *argv("rl", data, out, "--max-steps", "60", "--checkpoint-every", "20")]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
             for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    one_error_line(next(err for code, err in results if code == 2))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["last.ckpt", "step=60.ckpt"]
    assert len(list((out / "tb").rglob("events.out.tfevents.*"))) == 1


@pytest.mark.parametrize("kind", ["rl", pytest.param("lm", marks=pytest.mark.slow)])
def test_ctrl_c_in_training_exits_130_and_names_resume(data, tmp_path, kind):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "ad", *argv(kind, data, out, "--max-steps", "100000",
                                                                "--checkpoint-every", "2")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**ENV, "PYTHONFAULTHANDLER": "1"})
    try:
        deadline = time.monotonic() + 240
        while not (out / "checkpoints" / "last.ckpt").is_file():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:  # still running: its threads' stacks (faulthandler) say where it hangs
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=60)
            pytest.fail(f"no exit within 120 s of Ctrl-C; the process's stacks:\n{err[-6000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted;" in err and "--resume" in err and "Traceback" not in err


def test_an_interrupt_before_any_checkpoint_says_to_start_again(tmp_path):
    from models.trainer import fit

    class Trainer:
        interrupted = True

        def fit(self, *args, **kwargs):
            raise SystemExit(1)  # what Lightning does after Ctrl-C

    with pytest.raises(KeyboardInterrupt, match="no checkpoint was written yet"):
        fit(Trainer(), None, None, tmp_path, None)


def test_ctrl_c_during_fit_stops_at_the_step_end_and_a_second_one_at_once(capsys):
    import os

    from models.trainer import safe_interrupt_callback

    before = signal.getsignal(signal.SIGINT)
    callback = safe_interrupt_callback()
    with callback.ctrl_c_at_step_ends():
        os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C: noted, nothing raised mid-step
        time.sleep(0.05)
        assert callback.requested and "stopping at the end of this step" in capsys.readouterr().err
        with pytest.raises(KeyboardInterrupt):  # ... raised at the step's end
            callback.on_train_batch_end(None, None, None, None, 0)
        with pytest.raises(KeyboardInterrupt):  # the second Ctrl-C: at once
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    assert signal.getsignal(signal.SIGINT) is before
