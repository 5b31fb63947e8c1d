"""Run files (eval outputs, config.yaml, summaries, reports, figures, model weights) are written whole or not at all,
a run's options are never lost on --resume, and paths a user names get a message that says what is wrong.

The kill cases are fault injections: a write that dies half way (the process "killed" inside ``write``), and a
process killed with SIGKILL in the middle of a write. Each checks that the file it replaces is intact.
"""
from __future__ import annotations

import builtins
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ad import cli
from cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
TINY_DATA = ["--size", "3", "--steps-per-goal", "2000", "--hidden", "16", "--progress", "false", "--plots", "false",
             "--tensorboard", "false"]
TINY_TRAIN = ["--context", "20", "--batch-size", "4", "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
              "--n-ff", "32", "--warmup-steps", "1", "--val-every", "0", "--progress", "false", "--threads", "1",
              "--checkpoint-every", "2"]




def train(capsys, data: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "train", "rl", "--data", str(data), "--out", str(out), *TINY_TRAIN, *extra)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A 3x3 DarkRoom dataset (8 goals, 2 held out)."""
    out = tmp_path_factory.mktemp("runfiles") / "d"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["generate", "darkroom", "--out", str(out), *TINY_DATA, "--heldout-fraction", "0.25"])
    assert exit_info.value.code == 0
    return out


@pytest.fixture(scope="module")
def run(data, tmp_path_factory) -> Path:
    """A tiny `ad train rl` run on ``data`` (4 steps)."""
    out = tmp_path_factory.mktemp("runfiles") / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "rl", "--data", str(data), "--out", str(out), *TINY_TRAIN, "--max-steps", "4"])
    assert exit_info.value.code == 0
    return out


@pytest.fixture
def own_run(data, tmp_path, capsys) -> Path:
    """A tiny `ad train rl` run of the test's own, in its first folder (resume tests change it)."""
    out = tmp_path / "run"
    assert train(capsys, data, out, "--max-steps", "4")[0] == 0
    return out


class _DyingFile:
    """A file whose first ``write`` writes half of its data, then the process "dies" (KeyboardInterrupt)."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, data):
        self.fh.write(data[: max(1, len(data) // 2)])
        self.fh.flush()
        raise KeyboardInterrupt("killed in the middle of a write")

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()
        return False

    def __iter__(self):
        return iter(self.fh)


@pytest.fixture
def dying_writes(monkeypatch):
    """``dying_writes(folder)``: from now on every file opened for writing in ``folder`` dies mid-write."""
    real_open = io.open

    def arm(folder: Path) -> None:
        folder = Path(folder).resolve()

        def dying_open(file, mode="r", *args, **kwargs):
            fh = real_open(file, mode, *args, **kwargs)
            if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax") \
                    and Path(file).resolve().parent == folder:
                return _DyingFile(fh)
            return fh

        monkeypatch.setattr(io, "open", dying_open)
        monkeypatch.setattr(builtins, "open", dying_open)

    return arm


def snapshot(folder: Path, names) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in names}


# ---------------------------------------------------------------------------- the shared atomic writer
def test_atomic_writer_keeps_the_old_file_when_the_write_dies(tmp_path, dying_writes):
    from ad.files import write_json_atomic

    path = tmp_path / "summary.json"
    write_json_atomic(path, {"old": 1})
    dying_writes(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, {"new": list(range(1000))})
    assert json.loads(path.read_text()) == {"old": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporary file left


def test_atomic_writer_survives_kill_9_in_the_middle_of_a_write(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text('{"old": 1}')
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from ad.files import atomic_path
        with atomic_path({str(path)!r}) as tmp:
            with open(tmp, "w") as fh:
                fh.write('{{"new": ')
                fh.flush()
                print("writing", flush=True)
                time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    try:
        assert writer.stdout.readline().strip() == "writing"
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.wait()
    assert json.loads(path.read_text()) == {"old": 1}


def test_atomic_files_get_the_usual_mode(tmp_path):
    from ad.files import write_text_atomic

    old = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "report.md", "# report")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# ---------------------------------------------------------------------------- results lost or corrupted
def test_eval_files_survive_a_write_that_dies(data, run, tmp_path, capsys, dying_writes):
    out = tmp_path / "eval"
    argv = ["eval", "--ckpt", str(run), "--data", str(data), "--episodes", "3", "--seeds", "1", "--progress", "false",
            "--out", str(out)]
    assert run_cli(capsys, *argv)[0] == 0
    names = ("eval.json", "eval.csv", "in_context.png")
    before = snapshot(out, names)
    dying_writes(out)
    with pytest.raises(KeyboardInterrupt):
        cli.run(argv)
    assert snapshot(out, names) == before
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]


def test_model_weights_are_written_with_the_usual_mode(run):
    mode = stat.S_IMODE((run / "model" / "model.safetensors").stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_config_yaml_survives_a_resume_that_dies_while_writing_it(data, own_run, tmp_path, capsys, dying_writes):
    copy = own_run
    before = (copy / "config.yaml").read_bytes()
    dying_writes(copy)
    with pytest.raises(KeyboardInterrupt):
        cli.run(["train", "rl", "--data", str(data), "--out", str(copy), *TINY_TRAIN, "--max-steps", "6",
                 "--resume"])
    assert (copy / "config.yaml").read_bytes() == before


@pytest.mark.parametrize("content", ["", "\x00\x01 not: [yaml", "just a string"])
def test_an_empty_or_unreadable_run_config_refuses_resume(data, own_run, tmp_path, capsys, content):
    copy = own_run
    (copy / "config.yaml").write_text(content)
    code, err, _ = train(capsys, data, copy, "--max-steps", "6", "--resume", "--batch-size", "8", "--learning-rate",
                         "0.05")
    assert code == 2 and "config.yaml" in err and "--print-config" in err
    assert (copy / "config.yaml").read_text() == content  # nothing rewritten, nothing trained
    assert not (copy / "checkpoints" / "step=6.ckpt").exists()


def test_export_minari_into_a_dataset_is_refused(data, capsys):
    pytest.importorskip("minari")
    listing = sorted(p.relative_to(data) for p in data.rglob("*"))
    code, err, _ = run_cli(capsys, "export", "minari", str(data), "--name", "ad/darkroom3/test-v0", "--out", str(data))
    assert code == 2 and "learning-history dataset" in err
    code, err, _ = run_cli(capsys, "export", "minari", str(data), "--name", "ad/darkroom3/test-v0", "--out",
                           str(data / "minari"))
    assert code == 2 and "lies inside" in err
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == listing


# ---------------------------------------------------------------------------- silently wrong: eval labels
@pytest.mark.parametrize("argv,expected", [
    (["--baseline-name", "AD"], "--name and --baseline-name are both 'AD'"),
    (["--name", "random"], "--name 'random'"),
    (["--name", "source"], "--name 'source'"),
    (["--baseline-name", "random"], "--baseline-name 'random'"),
])
def test_eval_refuses_duplicate_and_reserved_labels(data, run, tmp_path, capsys, argv, expected):
    out = tmp_path / "eval"
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(run), "--baseline", str(run), "--data", str(data),
                           "--episodes", "2", "--progress", "false", "--out", str(out), *argv)
    assert code == 2 and expected in err
    assert not out.exists()


# ---------------------------------------------------------------------------- messages that mislead
def test_eval_of_a_missing_run_folder_says_it_does_not_exist(data, tmp_path, capsys):
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(tmp_path / "missing"), "--data", str(data),
                           "--out", str(tmp_path / "e"))
    assert code == 2 and "does not exist" in err and "holds no checkpoint" not in err


def test_a_folder_given_as_a_config_file_says_it_is_a_folder(tmp_path, capsys):
    code, err, _ = run_cli(capsys, "generate", "darkroom", "--config", str(tmp_path), "--print-config")
    assert code == 2 and "is a folder, not a file" in err


@pytest.mark.parametrize("command", ["generate", "train", "eval"])
@pytest.mark.parametrize("kind", ["dangling", "under-a-file"])
def test_out_that_cannot_be_a_folder_says_why(data, run, tmp_path, capsys, command, kind):
    if kind == "dangling":
        out = tmp_path / "link"
        out.symlink_to(tmp_path / "nowhere")
        expected = "symbolic link"
    else:
        (tmp_path / "afile").write_text("keep me")
        out = tmp_path / "afile" / "sub"
        expected = "is a file, not a folder"
    argv = {"generate": ["generate", "darkroom", "--out", str(out), *TINY_DATA, "--goals", "0,0"],
            "train": ["train", "rl", "--data", str(data), "--out", str(out), *TINY_TRAIN, "--max-steps", "2"],
            "eval": ["eval", "--ckpt", str(run), "--data", str(data), "--episodes", "2", "--out", str(out)]}[command]
    code, err, _ = run_cli(capsys, *argv)
    assert code == 2 and expected in err and "File exists" not in err
    assert not (tmp_path / "nowhere").exists()


def test_keydoor_size_message_names_key_to_door(tmp_path, capsys):
    code, err, _ = run_cli(capsys, "generate", "keydoor", "--size", "1", "--out", str(tmp_path / "k"))
    assert code == 2 and "Key-to-Door" in err and "DarkRoom" not in err


def test_a_moved_run_folder_resumes(data, run, tmp_path, capsys):
    moved = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(run, moved)
    code, err, _ = train(capsys, data, moved, "--max-steps", "6", "--resume")
    assert code == 0, err
    assert (moved / "checkpoints" / "step=6.ckpt").is_file()


def test_a_resume_refusal_is_a_short_readable_line(data, own_run, tmp_path, capsys):
    copy = own_run
    code, err, _ = train(capsys, data, copy, "--max-steps", "6", "--resume", "--batch-size", "8", "--learning-rate",
                         "0.05", "--expert-only")
    assert code == 2
    assert "batch_size 4 -> 8" in err and "learning_rate 0.001 -> 0.05" in err and "expert_only False -> True" in err
    assert len(err) < 400 and "{" not in err


def test_following_the_corrupt_model_config_advice_repairs_it(data, own_run, tmp_path, capsys):
    copy = own_run
    (copy / "model" / "config.json").write_text('{"model_type": "ad-rl", ')
    eval_argv = ["eval", "--ckpt", str(copy), "--data", str(data), "--episodes", "2", "--seeds", "1",
                 "--progress", "false"]
    code, err, _ = run_cli(capsys, *eval_argv)
    assert code == 2 and "is corrupt" in err and "--resume" in err
    assert train(capsys, data, copy, "--max-steps", "4", "--resume")[0] == 0  # what the message says to do
    assert run_cli(capsys, *eval_argv)[0] == 0


def test_home_in_a_config_files_out_is_expanded(tmp_path, monkeypatch):
    from ad.config import load_config_file

    monkeypatch.setenv("HOME", str(tmp_path))
    config = tmp_path / "c.yaml"
    config.write_text("out: ~/runs/x\ndata: data/d\n")
    assert load_config_file(str(config)) == {"out": str(tmp_path / "runs" / "x"), "data": "data/d"}


def test_stale_step_checkpoints_are_removed_when_a_resumed_run_finishes(data, own_run, tmp_path, capsys):
    copy = own_run
    checkpoints = copy / "checkpoints"
    shutil.copy(checkpoints / "last.ckpt", checkpoints / "step=2.ckpt")  # what a killed run leaves behind
    assert train(capsys, data, copy, "--max-steps", "6", "--resume")[0] == 0
    assert sorted(p.name for p in checkpoints.glob("step=*.ckpt")) == ["step=6.ckpt"]


def test_finished_generation_leaves_no_empty_staging_folders(data):
    staging = data / ".staging"
    assert not staging.exists() or not [p for p in staging.iterdir() if p.name.startswith("task=")]
