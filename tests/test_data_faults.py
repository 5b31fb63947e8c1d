"""Faults that gave silently wrong data or misleading results: each case runs the real CLI (``ad.cli.main``) or
the store on real Parquet and checks what a user sees (exit code 2 and one ``error:`` line, or a warning) and
what is on disk."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from ad.history import HistoryReader, HistoryWriter, content_hash
from benchmarks.helpers.synthetic import SPEC, synthetic_columns
from cli_run import run_cli




def bandit(capsys, out: Path, instances: int, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "generate", "bandit", "--out", str(out), "--instances", str(instances), "--pulls", "10",
                   "--progress", "false", *extra)


# ---------------------------------------------------------------------------- shards' size
def test_bytes_per_transition_do_not_grow_with_the_number_of_instances(tmp_path, capsys):
    """Every shard used to carry the whole dataset's metadata (every task's split): 10x the instances made each
    transition ~10x bigger. A shard's header now holds only its own task's part."""
    per_transition = {}
    for n in (100, 1000):
        assert bandit(capsys, tmp_path / f"b{n}", n)[0] == 0
        reader = HistoryReader(tmp_path / f"b{n}")
        assert reader.num_transitions() == 10 * n
        shards = sum(path.stat().st_size for path in (tmp_path / f"b{n}").glob("task=*/run=*/*.parquet"))
        per_transition[n] = shards / reader.num_transitions()
    assert per_transition[1000] < 1.2 * per_transition[100], per_transition


def test_a_shard_header_names_its_own_task_and_not_the_others(tmp_path, capsys):
    out = tmp_path / "b"
    assert bandit(capsys, out, 20, "--heldout-fraction", "0.25")[0] == 0
    reader = HistoryReader(out)
    held = set(reader.metadata["split"]["heldout"])
    for unit in reader.units():
        header = json.loads(pq.read_schema(out / unit["files"][0]).metadata[b"ad.dataset"])
        assert header["family"] == "bandit" and header["spec"] == reader.metadata["spec"]
        assert header["task_spec"] == reader.metadata["task_spec"] and header["source"] == reader.metadata["source"]
        assert header["task"] == unit["task"] and header["run"] == unit["run"]
        assert header["split"] == ("heldout" if unit["task"] in held else "train")
        assert "units" not in header and "tasks" not in header
        assert ("task_info" in header) == (unit["task"] in held)


def _old_style_dataset(path: Path, monkeypatch, tasks: int) -> None:
    """A dataset as the previous writer made it: every shard carries the whole dataset header."""
    with monkeypatch.context() as patch:
        patch.setattr(HistoryWriter, "file_metadata",
                      lambda self, task, run: {b"ad.dataset": json.dumps(self._header()).encode()})
        _write_synthetic(path, range(tasks))


def _write_synthetic(path: Path, tasks) -> None:
    names = [f"syn-{k}" for k in range(4)]
    meta = {"task_spec": {"env": "synthetic"}, "split": {"train": names[:3], "heldout": names[3:]},
            "tasks": {n: {"goal": k} for k, n in enumerate(names)}}
    writer = HistoryWriter(path, SPEC, family="synthetic", metadata=meta)
    for k in tasks:
        if writer.is_complete(names[k], 0):
            continue
        with writer.unit(names[k], 0) as unit:
            unit.append(synthetic_columns(np.random.default_rng(k), 2, 50, (k % 9, 3)))
    writer.close()


def test_datasets_with_full_headers_in_their_shards_still_read_and_resume(tmp_path, monkeypatch, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    _old_style_dataset(old, monkeypatch, 2)
    assert b'"split": {"train"' in pq.read_schema(next(old.glob("task=*/run=*/*.parquet"))).metadata[b"ad.dataset"]
    _write_synthetic(old, range(4))  # resumed by today's writer: two old-style and two new-style units
    _write_synthetic(new, range(4))
    assert content_hash(old) == content_hash(new)
    assert [len(s) for s in HistoryReader(old).streams()] == [len(s) for s in HistoryReader(new).streams()]
    code, err, out = run_cli(capsys, "inspect", str(old))
    assert code == 0

    import duckdb
    import polars as pl
    import pyarrow.dataset as pds

    glob = f"{old}/**/*.parquet"
    assert duckdb.sql(f"select count(*) from read_parquet('{glob}', hive_partitioning=true)").fetchall()[0][0] == 400
    assert pl.scan_parquet(glob, hive_partitioning=True).select(pl.len()).collect().item() == 400
    table = pds.dataset(old, format="parquet", partitioning="hive", exclude_invalid_files=True).to_table()
    assert table.num_rows == 400 and set(table.column("task").to_pylist()) == {f"syn-{k}" for k in range(4)}


def test_shard_rows_are_unchanged_by_the_smaller_header(tmp_path, monkeypatch):
    """Only the file footer's metadata changed: every column's data reads back identical."""
    old, new = tmp_path / "old", tmp_path / "new"
    _old_style_dataset(old, monkeypatch, 4)
    _write_synthetic(new, range(4))
    for a, b in zip(sorted(old.glob("task=*/run=*/*.parquet")), sorted(new.glob("task=*/run=*/*.parquet"))):
        assert pq.read_table(a).replace_schema_metadata() == pq.read_table(b).replace_schema_metadata()
        assert pq.ParquetFile(b).metadata.serialized_size < pq.ParquetFile(a).metadata.serialized_size


# ---------------------------------------------------------------------------- math reference answers
def _problems(tmp_path: Path, answers: list, name: str = "p.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"question": f"q{i}?", "answer": a}) + "\n" for i, a in enumerate(answers)))
    return path


def test_math_reference_answers_are_read_whole(tmp_path):
    """``#### 1/2`` was stored as 1 (the fraction bar ended the number); fractions, decimals and exponents are
    now read whole and exactly."""
    from fractions import Fraction

    from tasks.math.problems import load_jsonl

    answers = ["So half.\n#### 1/2", "#### -3.50", "#### 2.5e-3", "#### $1,234", "7/4", 0.1, 12, "It is 3/8 now"]
    problems = load_jsonl(str(_problems(tmp_path, answers)))
    assert [p.answer for p in problems] == [Fraction(1, 2), Fraction(-7, 2), Fraction(1, 400), Fraction(1234),
                                            Fraction(7, 4), Fraction(1, 10), Fraction(12), Fraction(3, 8)]
    assert problems[0].solution.endswith("#### 1/2") and problems[4].solution == "#### 7/4"


@pytest.mark.parametrize("answer,why", [("#### 1e999", "not finite"), ("#### 1/0", "divides by zero"),
                                        ("#### nan", "not finite"), ("#### 3 apples", "not one number"),
                                        ("#### 1/2/3", "not one number")])
def test_math_answers_that_cannot_be_read_whole_are_refused_with_file_and_line(tmp_path, capsys, answer, why):
    path = _problems(tmp_path, ["#### 3", answer, "#### 4"])
    code, err, _ = run_cli(capsys, "generate", "math", "--problems", str(path), "--out", str(tmp_path / "m"))
    assert code == 2 and f"{path}:2:" in err and why in err
    assert not (tmp_path / "m").exists()


def test_a_json_number_beyond_the_float_range_is_refused(tmp_path):
    from ad.errors import UserError
    from tasks.math.problems import load_jsonl

    path = tmp_path / "p.jsonl"
    path.write_text('{"question": "a", "answer": 3}\n{"question": "b", "answer": 1e999}\n')
    with pytest.raises(UserError, match=r"p.jsonl:2: .*not finite"):
        load_jsonl(str(path))


def test_a_marked_fraction_in_a_completion_is_read_whole():
    from fractions import Fraction

    from tasks.math.answers import parse_answer

    assert parse_answer("half of 3 is\n#### 3/2").value == Fraction(3, 2)
    assert parse_answer("\\boxed{7/2}").value == Fraction(7, 2) and parse_answer("#### 7/2").value != Fraction(7)


# ---------------------------------------------------------------------------- Key-to-Door sizes and summaries
KEYDOOR_TINY = ["--progress", "false", "--plots", "false", "--hidden", "8"]


@pytest.mark.parametrize("argv,minimum", [(["--episode-length", "1"], 24),
                                          (["--size", "3", "--tasks", "0", "--episode-length", "5"], 6),
                                          (["--size", "5", "--random-start", "--episode-length", "12"], 16)])
def test_an_episode_too_short_for_a_task_is_refused_with_the_minimum(tmp_path, capsys, argv, minimum):
    """Such a dataset used to be written: optimal returns 0, "0/0 goals, mean ratio nan"."""
    out = tmp_path / "k"
    code, err, _ = run_cli(capsys, "generate", "keydoor", "--out", str(out), *KEYDOOR_TINY, *argv)
    assert code == 2 and "--episode-length" in err and f"--episode-length {minimum} or more" in err
    assert not out.exists()


def test_the_stated_minimum_episode_length_reaches_the_optimum_of_every_task():
    from tasks.keydoor.pairs import all_pairs, optimal_return, steps_needed

    for size in (2, 3, 4):
        for random_start in (False, True):
            for pair in all_pairs(size):
                need = steps_needed(size, pair, random_start)
                assert optimal_return(size, pair, need, random_start) == pytest.approx(2.0)
                assert optimal_return(size, pair, need - 1, random_start) < 2.0 - 1e-9


def test_more_tasks_than_key_door_pairs_are_refused_with_their_number(tmp_path, capsys):
    out = tmp_path / "k"
    code, err, _ = run_cli(capsys, "generate", "keydoor", "--out", str(out), "--size", "3", "--tasks", "1000",
                           *KEYDOOR_TINY)
    assert code == 2 and "only 72 key/door pairs" in err and "--tasks 72" in err
    assert not out.exists()


def _strict_json(path: Path):
    def refuse(constant: str):
        raise AssertionError(f"{path} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_a_run_where_no_episode_finishes_writes_strict_json_that_says_why(tmp_path, capsys):
    """Too few steps for an episode to end in the last 5% of a stream: the ratios are unknown. summary.json and
    dataset.json used to hold NaN (not JSON); they now hold null and the summary says why."""
    out = tmp_path / "k"
    code, _, stdout = run_cli(capsys, "generate", "keydoor", "--out", str(out), "--tasks", "2",
                              "--steps-per-task", "100", *KEYDOOR_TINY)
    assert code == 0 and "nan" not in stdout
    summary = _strict_json(out / "_run" / "summary.json")
    assert summary["mean_final_ratio"] is None and summary["tasks_without_ratio"] == 2
    assert "--steps-per-task" in summary["mean_final_ratio_note"]
    units = _strict_json(out / "dataset.json")["units"].values()
    assert [u["info"]["final_ratio"] for u in units] == [None, None]


# ---------------------------------------------------------------------------- interrupted generations
def interrupted_bandit(out: Path, capsys, monkeypatch, after: int) -> Path:
    """A 12-instance bandit dataset whose generation was interrupted after ``after`` instances (tasks)."""
    from ad.history.unit import UnitWriter

    commit, calls = UnitWriter.commit, []

    def interrupted(self, *args, **kwargs):
        if len(calls) == after:
            raise KeyboardInterrupt
        calls.append(self.task)
        return commit(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(UnitWriter, "commit", interrupted)
        assert bandit(capsys, out, 12, "--heldout-fraction", "0.25")[0] == 130
    assert len(HistoryReader(out).tasks()) == after
    return out


@pytest.fixture
def incomplete(tmp_path, capsys, monkeypatch) -> Path:
    """A bandit dataset whose generation was interrupted after 2 of its 12 instances (tasks)."""
    return interrupted_bandit(tmp_path / "bandit", capsys, monkeypatch, 2)


NOTE = "2 of 12 tasks; re-run the generate command"


def test_inspect_warns_that_a_dataset_is_incomplete(incomplete, capsys):
    code, err, out = run_cli(capsys, "inspect", str(incomplete))
    assert code == 0 and NOTE in err and err.startswith("warning:")


def test_a_finished_dataset_reads_without_a_warning(incomplete, capsys):
    assert bandit(capsys, incomplete, 12, "--heldout-fraction", "0.25")[0] == 0  # the advice, followed
    code, err, _ = run_cli(capsys, "inspect", str(incomplete))
    assert code == 0 and "incomplete" not in err
    assert HistoryReader(incomplete).completeness() == (12, 12)


def test_training_on_an_incomplete_dataset_needs_an_explicit_flag(incomplete, tmp_path, capsys):
    for kind in ("rl", "lm"):
        code, err, _ = run_cli(capsys, "train", kind, "--data", str(incomplete), "--out", str(tmp_path / kind),
                               "--max-steps", "1", "--progress", "false")
        assert code == 2 and NOTE in err and "--allow-incomplete" in err
        assert not (tmp_path / kind).exists()
    code, err, _ = run_cli(capsys, "train", "rl", "--data", str(incomplete), "--out", str(tmp_path / "rl"),
                           "--max-steps", "1", "--progress", "false", "--allow-incomplete", "--n-layer", "1",
                           "--n-embd", "16", "--n-head", "1", "--context", "8", "--batch-size", "2", "--val-every", "0")
    assert code == 0 and NOTE in err and "warning:" in err


def test_export_refuses_an_incomplete_dataset_and_the_import_round_trip_says_so(incomplete, tmp_path, capsys):
    pytest.importorskip("minari")
    root, name = tmp_path / "minari", "ad/bandit/part-v0"
    code, err, _ = run_cli(capsys, "export", "minari", str(incomplete), "--name", name, "--out", str(root))
    assert code == 2 and NOTE in err and "--allow-incomplete" in err and not (root / name).exists()
    code, err, _ = run_cli(capsys, "export", "minari", str(incomplete), "--name", name, "--out", str(root),
                           "--allow-incomplete")
    assert code == 0 and NOTE in err
    restored = tmp_path / "restored"
    code, err, out = run_cli(capsys, "import", "minari", "--name", name, "--root", str(root), "--out", str(restored))
    assert code == 0 and "2 of 12 tasks" in err and "warning:" in err
    assert HistoryReader(restored).completeness() == (2, 12)
    code, err, _ = run_cli(capsys, "inspect", str(restored))
    assert "2 of 12 tasks" in err


def test_eval_says_the_held_out_tasks_are_not_generated_yet(tmp_path, capsys, monkeypatch):
    """It used to advise --heldout-fraction although the dataset was generated with it."""
    data = interrupted_bandit(tmp_path / "bandit", capsys, monkeypatch, 1)
    reader = HistoryReader(data)
    assert not set(reader.metadata["split"]["heldout"]) & set(reader.tasks())  # the first instance trains
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(tmp_path / "no-run"), "--data", str(data),
                           "--out", str(tmp_path / "eval"))
    assert code == 2 and "none of its 3 heldout tasks is complete" in err
    assert "1 of 12 tasks; re-run the generate command" in err
    assert "--heldout-fraction" not in err.split("error:")[1]


def test_eval_names_the_heldout_fraction_that_held_out_nothing(tmp_path, capsys):
    out = tmp_path / "b"
    assert bandit(capsys, out, 4, "--heldout-fraction", "0")[0] == 0
    code, err, _ = run_cli(capsys, "eval", "--ckpt", str(tmp_path / "no-run"), "--data", str(out),
                           "--out", str(tmp_path / "eval"))
    assert code == 2 and "generated with --heldout-fraction 0.0" in err and "larger --heldout-fraction" in err


# ---------------------------------------------------------------------------- ad inspect --plot
@pytest.fixture
def small_bandit(tmp_path, capsys) -> Path:
    out = tmp_path / "b"
    assert bandit(capsys, out, 3)[0] == 0
    return out


def test_inspect_plot_into_an_existing_folder_writes_a_named_file_inside_it(small_bandit, tmp_path, capsys,
                                                                            monkeypatch):
    """It used to write ./<folder>.png and report the folder."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "figures"
    folder.mkdir()
    code, _, out = run_cli(capsys, "inspect", str(small_bandit), "--plot", "figures")
    assert code == 0 and (folder / "learning_curves.png").stat().st_size > 1000
    assert not (tmp_path / "figures.png").exists()
    assert "learning_curves.png" in out.replace("\n", "")


def test_inspect_plot_without_an_extension_reports_the_file_it_wrote(small_bandit, tmp_path, capsys):
    code, _, out = run_cli(capsys, "inspect", str(small_bandit), "--plot", str(tmp_path / "curves"))
    assert code == 0 and (tmp_path / "curves.png").is_file() and "curves.png" in out.replace("\n", "")


@pytest.mark.parametrize("name", ["curves.txt", "curves.bmp", "curves.parquet"])
def test_inspect_plot_with_an_unsupported_extension_is_refused_with_the_list(small_bandit, tmp_path, capsys, name):
    code, err, _ = run_cli(capsys, "inspect", str(small_bandit), "--plot", str(tmp_path / name))
    assert code == 2 and "--plot" in err and ".png, .pdf, .svg" in err
    assert not (tmp_path / name).exists()


def test_every_listed_figure_type_has_a_writer():
    from ad.plots import FIGURE_TYPES, pyplot

    plt = pyplot()
    fig = plt.figure()
    assert set(FIGURE_TYPES) <= set(fig.canvas.get_supported_filetypes())
    plt.close(fig)
