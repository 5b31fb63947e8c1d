"""BENCHMARKS.md and the README's results block are what benchmarks/make_table.py makes of benchmarks/results/*.json,
and the figures carry what the page is generated from."""
from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import make_table  # noqa: E402
from benchmarks.common import PAGES  # noqa: E402


@pytest.fixture(scope="module")
def figures():
    return make_table.load()


def _headline(figures):
    return copy.deepcopy(next(f for f in figures if f.get("headline")))


def test_page_and_readme_block_match_the_json(figures):
    for path, text in make_table.expected(figures).items():
        assert path.read_text() == text, f"{path.name} differs from the JSON: run python benchmarks/make_table.py"


def test_the_figures_have_no_problems(figures):
    assert make_table.problems(figures) == []


def test_one_row_per_capability_in_the_allowed_range(figures):
    rows = make_table.headlines(figures)
    # one screenful-ish page: a capability with several figures folds them into its experiment page, not new rows
    assert 25 <= len(rows) <= 48
    assert len({f["capability"] for f in rows}) == len(rows)
    assert rows[0]["capability"].startswith("DarkRoom in-context")  # the demo figure first
    readme = [f for f in rows if f.get("readme")]
    assert readme[0] is rows[0]


def test_page_names_no_issue_or_session_and_short_lines(figures):
    page = make_table.render_page(figures) + make_table.render_readme_block(figures)
    assert not re.search(r"#\d|\bsession\b|\bissue\b", page, re.IGNORECASE)
    assert max(len(line) for line in page.splitlines()) <= make_table.MAX_LINE


def test_check_fails_when_the_page_differs(figures, tmp_path, monkeypatch, capsys):
    page = tmp_path / "BENCHMARKS.md"
    page.write_text(make_table.render_page(figures))
    monkeypatch.setattr(make_table, "PAGE", page)
    monkeypatch.setattr(make_table, "README", tmp_path / "README.md")
    with pytest.raises(SystemExit) as ok:
        make_table.main(["--check"])
    assert ok.value.code == 0
    page.write_text(page.read_text().replace("**0.972**", "**0.880**"))
    with pytest.raises(SystemExit) as stale:
        make_table.main(["--check"])
    assert stale.value.code == 1
    assert "+| DarkRoom in-context" in capsys.readouterr().out


def test_a_changed_figure_changes_the_page(figures):
    changed = copy.deepcopy(figures)
    head = next(f for f in changed if f.get("headline"))
    head["ours"] = head["ours"] + 1.2345
    assert make_table.render_page(changed) != make_table.render_page(figures)


def test_readme_block_between_the_markers(figures):
    readme = f"# x\n\nbefore\n{make_table.BEGIN}\nold table\n{make_table.END}\nafter\n"
    out = make_table.with_readme_block(readme, make_table.render_readme_block(figures))
    assert "old table" not in out and out.startswith("# x\n\nbefore\n") and out.endswith("\nafter\n")
    assert "[darkroom](docs/experiments/darkroom.md)" in out
    assert make_table.with_readme_block("no markers\n", "table\n") == "no markers\n"


def test_problem_headline_not_current(figures):
    bad = _headline(figures)
    bad["current"] = False
    assert any("not current" in p for p in make_table.problems([bad]))


def test_problem_missing_field(figures):
    bad = _headline(figures)
    del bad["hardware"]
    assert any("lacks hardware" in p for p in make_table.problems([bad]))


def test_problem_unknown_page(figures):
    bad = _headline(figures)
    bad["page"] = "issue-17"
    assert bad["page"] not in PAGES
    assert any("is not one of" in p for p in make_table.problems([bad]))


def test_problem_config_does_not_exist(figures):
    bad = _headline(figures)
    bad["config"] = "configs/darkroom/no-such-config.yaml"
    assert any("does not exist" in p for p in make_table.problems([bad]))


def test_problem_two_headlines_for_one_capability(figures):
    one = _headline(figures)
    assert any("2 headline figures" in p for p in make_table.problems([one, copy.deepcopy(one)]))


def test_problem_goal_unjudged(figures):
    bad = _headline(figures)
    bad["goal"], bad["met"] = "as good as it gets", None
    assert any("cannot be checked" in p for p in make_table.problems([bad]))


@pytest.mark.parametrize("goal, ours, reference, higher, expected", [
    (">= 0.9", 0.972, None, True, True),
    (">= 0.9", 0.85, None, True, False),
    ("<= 1.2x", 14.0, 10.0, False, False),
    ("ratio <= 1.05", 11.87, 11.89, False, True),
    (">= 10M/s", 2.3e7, 1.8e5, True, True),
    ("ours <= 2", 2.69, 191.0, False, False),
    (">= 2x reference", 53040.0, 12409.0, True, True),
    (">= 0.8 (RL-format AD: the reference)", 0.97, 0.97, True, True),
    ("faster", 0.22, 0.05, True, True),
    ("all", 40, 40, True, True),
    ("0", 0, None, False, True),
    ("faster, same loss", 0.6, 0.3, True, None),
])
def test_goal_met(goal, ours, reference, higher, expected):
    ratio = None if reference in (None, 0) else ours / reference
    fig = {"goal": goal, "ours": ours, "reference": reference, "ratio": ratio, "higher_is_better": higher}
    assert make_table.goal_met(fig) is expected


def test_report_records_the_page_fields_and_keeps_headline_marks(tmp_path, monkeypatch):
    from benchmarks import common

    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(sys, "argv", ["benchmarks/x.py"])
    first = common.report("x", [common.figure("speed", "steps/s", 3.0, 1.0, ">= 2x")], quick=False,
                          capability="X speed", page="darkroom", config="configs/darkroom/demo.yaml")
    written = json.loads(first.read_text())[0]
    assert written["current"] is True and re.fullmatch(r"\d+-core \S+ CPU|\d+x .+", written["hardware"])
    assert (written["capability"], written["page"], written["config"]) == ("X speed", "darkroom",
                                                                           "configs/darkroom/demo.yaml")
    written.update(headline=True, short="speed")
    first.write_text(json.dumps([written]))
    again = json.loads(common.report("x", [common.figure("speed", "steps/s", 4.0, 1.0, ">= 2x")], quick=False)
                       .read_text())[0]
    assert again["headline"] is True and again["short"] == "speed" and again["capability"] == "X speed"
    quick = json.loads(common.report("x", [common.figure("speed", "steps/s", 4.0, 1.0, ">= 2x")], quick=True)
                       .read_text())[0]
    assert quick["current"] is False and "headline" not in quick
    with pytest.raises(ValueError):
        common.report("x", [], quick=False, page="no-such-page")


def test_parse_args_reads_a_config_and_flags_override(tmp_path, capsys, monkeypatch):
    import argparse

    from benchmarks import common

    monkeypatch.setattr(common, "_config_file", None)  # parse_args records the file it read for report()

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[9])
    parser.add_argument("--out", type=Path, default=Path("data/x"))
    config = tmp_path / "c.yaml"
    config.write_text("sizes: [5, 7]\nout: data/y\n")
    args = common.parse_args(parser, ["--config", str(config), "--sizes", "11"])
    assert args.sizes == [11] and args.out == Path("data/y")
    with pytest.raises(SystemExit) as done:
        common.parse_args(argparse.ArgumentParser(parents=[], add_help=True), ["--print-config"])
    assert done.value.code == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("nope: 1\n")
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[9])
    with pytest.raises(SystemExit) as refused:
        common.parse_args(parser, ["--config", str(bad)])
    assert refused.value.code == 2 and "unknown option(s) nope" in capsys.readouterr().err


def test_report_writes_non_finite_figures_as_null(tmp_path, monkeypatch):
    """A milestone no run reached (NaN) or an infinite ratio is written as null: the results stay strict JSON."""
    import benchmarks.common as common
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    row = common.figure("a milestone nobody reached", "episode", float("nan"), None, "-")
    row["per_task"] = {"t0": float("inf"), "t1": 3.0}
    out = common.report("strict", [row], quick=True)
    written = json.loads(out.read_text())[0]  # json.loads would accept NaN; the check below does not
    assert written["ours"] is None and written["per_task"] == {"t0": None, "t1": 3.0}
    assert "NaN" not in out.read_text() and "Infinity" not in out.read_text()


def test_a_per_seed_block_lists_each_setting_by_seed_with_mean_and_range():
    figs = [{"_file": "x.json", "family": "a", "settings": {"seed": 1}, "ours": 0.8, "reference": 0.2, "met": "no",
             "unit": "success rate", "vs": "ED", "date": "d2", "config": "configs/a.yaml", "figure": "f"},
            {"_file": "x.json", "family": "a", "settings": {"seed": 0}, "ours": 0.9, "reference": 0.1, "met": "yes",
             "unit": "success rate", "date": "d1", "config": "configs/a.yaml", "figure": "f"},
            {"_file": "x.json", "family": "b", "seed": 0, "ours": 0.5, "reference": None, "met": "no", "figure": "g"},
            {"_file": "x.json", "family": "c", "ours": 0.1, "figure": "no seed: left out"},
            {"_file": "x_quick.json", "family": "a", "settings": {"seed": 0}, "ours": 0.0, "figure": "quick"}]
    table = make_table.render_seed_table(figs, "x").splitlines()
    assert table[0].startswith("| setting | success rate, seed 0 / seed 1 | mean (range) | ED, seed 0 / seed 1 |")
    assert table[2] == "| a | 0.90 / 0.80 | 0.85 (0.80-0.90) | 0.10 / 0.20 | yes / no | d1, d2 | `configs/a.yaml` |"
    assert table[3] == "| b | 0.50 / - | 0.50 (one seed) | - / - | no / - | None | - |"
    assert len(table) == 4
    page = "text\n<!-- figures:x begin -->\nstale\n<!-- figures:x end -->\nmore\n"
    rewritten = make_table.with_seed_tables(page, figs)
    assert rewritten.startswith("text\n<!-- figures:x begin -->\n| setting |") and rewritten.endswith(
        "| b | 0.50 / - | 0.50 (one seed) | - / - | no / - | None | - |\n<!-- figures:x end -->\nmore\n")
    assert make_table.with_seed_tables(rewritten, figs) == rewritten
