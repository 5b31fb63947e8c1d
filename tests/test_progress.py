"""Progress of long commands when stdout is not a terminal: plain lines (``step 3/6 loss ... step/s eta ...``)
instead of a bar that prints nothing to a pipe, or Lightning's "Epoch 4/-2"."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from ad.progress import PlainProgress, format_duration, interactive, progress_bar, track

ROOT = Path(__file__).resolve().parents[1]


def test_plain_lines_show_count_metrics_rate_and_eta():
    out = io.StringIO()
    bar = PlainProgress(10, unit="step", every=0, file=out)
    bar.set_postfix(loss="0.5")
    bar.update(4)
    bar.update(6)
    bar.close()
    bar.close()  # once
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"step 4/10 loss 0\.5 [\d.,e+]+ step/s eta \d+s", lines[0])
    assert re.fullmatch(r"step 10/10 loss 0\.5 [\d.,e+]+ step/s", lines[1])  # no eta when finished
    assert lines[2].startswith("step 10/10") and re.search(r"done in \d+s$", lines[2])


def test_plain_lines_are_throttled_and_the_last_one_always_prints():
    out = io.StringIO()
    with PlainProgress(1000, desc="eval AD", unit="episode", every=3600, file=out) as bar:
        for _ in range(1000):
            bar.update()
    assert out.getvalue().count("\n") == 1 and out.getvalue().startswith("eval AD: episode 1000/1000")


def test_not_a_terminal_means_plain_lines(capsys):
    assert not interactive()  # pytest captures stdout
    assert isinstance(progress_bar(5), PlainProgress)
    assert list(track(range(3), "items")) == [0, 1, 2]
    assert "items: it 3/3" in capsys.readouterr().out
    assert format_duration(75) == "1m15s" and format_duration(3725) == "1h02m05s" and format_duration(4.2) == "4s"


def test_training_prints_plain_progress_lines_to_a_pipe(tmp_path):
    from benchmarks.helpers.synthetic_goals import write_synthetic_dataset

    data = write_synthetic_dataset(tmp_path / "syn", num_tasks=3, length=200)
    argv = ["train", "rl", "--data", str(data), "--out", str(tmp_path / "run"), "--n-layer", "1", "--n-head", "2",
            "--n-embd", "16", "--n-ff", "32", "--context", "20", "--batch-size", "4", "--max-steps", "6",
            "--val-every", "3", "--val-batches", "2", "--threads", "1"]
    proc = subprocess.run([sys.executable, "-m", "ad", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env={**os.environ, "AD_PROGRESS_SECONDS": "0"},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    steps = re.findall(r"^step (\d+)/6 loss [-\d.e+]+ [\d.,e+]+ step/s", proc.stdout, flags=re.M)
    assert [int(s) for s in steps][:6] == [1, 2, 3, 4, 5, 6]
    assert re.search(r"^step 6/6 .* done in \d+s$", proc.stdout, flags=re.M)
    assert re.search(r"^validation at step 3: loss [\d.]+", proc.stdout, flags=re.M)
    assert "\r" not in proc.stdout and "Epoch" not in proc.stdout + proc.stderr


def test_progress_counter_shows_metrics_and_is_silent_when_off(capsys):
    from ad.progress import PhaseLog, Progress

    with Progress(4, "A2C", unit="update", every=0) as bar:
        bar.update(0, env_steps_per_s="1,234", mean_return=0.98765)
        bar.update(4)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("A2C: update 4/4 env_steps_per_s 1,234 mean_return 0.9877")
    assert out[-1].endswith("s") and "done in" in out[-1]
    with Progress(4, "off", show=False) as bar:
        bar.update(4, loss=1.0)
        bar.write("hidden")
    PhaseLog("textworld", show=False)("hidden")
    assert capsys.readouterr().out == ""
    PhaseLog("textworld")("SFT done")
    assert re.fullmatch(r"textworld \d+s: SFT done\n", capsys.readouterr().out)


def test_a_stopped_counter_says_so(capsys):
    from ad.progress import Progress

    try:
        with Progress(10, "run", every=3600) as bar:
            bar.update(3)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert "stopped after" in capsys.readouterr().out
