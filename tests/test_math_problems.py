"""Generated word problems (deterministic, answers right, held-out by template) and GSM8K jsonl loading errors."""
import json
import re
from fractions import Fraction

import pytest

from ad.errors import UserError
from tasks.math.problems import (LEVELS, TEMPLATE_NAMES, generate_problems, load_jsonl, make_problem,
                                 split_problems, split_templates)


def _replay(solution: str) -> int:
    """Recompute the answer from the worked solution's arithmetic (independent of the generator's running sum)."""
    x = int(re.match(r"Start with (\d+)\.", solution).group(1))
    for a, op, b, _ in re.findall(r"(\d+) ([-+x]) (\d+) = (\d+)", solution):
        if op == "x":
            continue  # the group product is added in the following "x + n*m" step
        assert int(a) == x
        x = x + int(b) if op == "+" else x - int(b)
    return x


@pytest.mark.parametrize("level", LEVELS)
def test_problems_are_deterministic_and_answers_follow_the_story(level):
    for template in TEMPLATE_NAMES:
        for index in range(20):
            p = make_problem(template, level, index)
            assert p == make_problem(template, level, index)
            assert p.answer >= 0 and p.answer.denominator == 1
            assert p.solution.endswith(f"#### {p.answer}") and _replay(p.solution) == p.answer
            assert len(re.findall(r"\d+", p.question)) >= level + 1  # one number per operation, plus the start


def test_levels_change_the_problem():
    assert make_problem("apples", 1, 0).question != make_problem("apples", 3, 0).question
    with pytest.raises(UserError, match="unknown difficulty level 4"):
        make_problem("apples", 4, 0)


def test_heldout_templates_differ_by_seed_and_never_train():
    splits = {seed: split_templates(seed, 0.25) for seed in range(4)}
    for train, held in splits.values():
        assert len(held) == 3 and not set(train) & set(held) and set(train) | set(held) == set(TEMPLATE_NAMES)
    assert len({tuple(held) for _, held in splits.values()}) > 1
    train, held = splits[0]
    assert {p.source for p in generate_problems(train, 1, 50)} <= set(train)


def _write(tmp_path, lines):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_gsm8k_jsonl_loads_and_splits(tmp_path):
    rows = [json.dumps({"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1:,}"})
            for i in range(998, 1008)]
    problems = load_jsonl(_write(tmp_path, rows[:5] + [""] + rows[5:]))
    assert [p.answer for p in problems] == [Fraction(i + 1) for i in range(998, 1008)]
    train, held = split_problems(problems, 0, 0.3)
    assert len(held) == 3 and len(train) == 7 and not {p.id for p in train} & {p.id for p in held}


@pytest.mark.parametrize("line, message", [
    ('{"question": "q", "answer": "#### 3"', r"p.jsonl:2: not valid JSON"),
    ('["q", "#### 3"]', r"p.jsonl:2: needs a JSON object"),
    ('{"question": "q"}', r"p.jsonl:2: needs a JSON object"),
    ('{"question": "q", "answer": "no number here"}', r"p.jsonl:2: the answer .* has no parsable final number"),
    ('{"question": "q", "answer": "#### three"}', r"p.jsonl:2: the answer .* has no parsable final number"),
])
def test_bad_jsonl_lines_name_file_and_line(tmp_path, line, message):
    good = json.dumps({"question": "What is 1 + 1?", "answer": "#### 2"})
    with pytest.raises(UserError, match=message):
        load_jsonl(_write(tmp_path, [good, line, good]))


def test_missing_or_tiny_file(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_jsonl(str(tmp_path / "nope.jsonl"))
    with pytest.raises(UserError, match="is a folder, not a file"):
        load_jsonl(str(tmp_path))
    with pytest.raises(UserError, match="at least 2"):
        load_jsonl(_write(tmp_path, [json.dumps({"question": "q", "answer": "#### 1"})]))
