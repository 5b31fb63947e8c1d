"""Math word problems with known answers: a small seeded generator of grade-school problems, and GSM8K-format jsonl.

A generated problem at difficulty level ``L`` is a chain of ``L`` operations on one running quantity in a story
template (:data:`TEMPLATES`), every intermediate value a non-negative integer; its text and answer depend only on
(template, level, index), so ids (``apples-L2-00017``) name problems exactly. The held-out split is by *template*
(:func:`split_templates`), so held-out problems are stories the policy never trained on.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from fractions import Fraction

from ad.errors import UserError
from ad.files import check_input_file, read_utf8
from tasks.math.answers import reference_answer

LEVELS = (1, 2, 3)
#: Largest starting value / operand per level.
_MAX = {1: 20, 2: 40, 3: 60}
_NAMES = ("Ava", "Ben", "Chloe", "Dev", "Ella", "Finn", "Grace", "Hugo", "Iris", "Jack", "Kira", "Leo", "Maya",
          "Noah", "Olga", "Pia", "Ravi", "Sara", "Tom", "Uma")


@dataclass(frozen=True)
class Problem:
    """One word problem: ``id`` (path-safe), ``question`` text, exact ``answer``, and a worked ``solution`` ending
    in ``#### answer`` (used for few-shot examples; a user's file gives its own)."""

    id: str
    question: str
    answer: Fraction
    solution: str
    source: str  # template name, or "file"


@dataclass(frozen=True)
class Template:
    """A story: the opening, phrases that add / take away / add groups, and the question. ``{name}`` and ``{n}``,
    ``{m}`` are filled in; ``{x}`` is the running quantity in the worked solution."""

    name: str
    start: str
    add: str
    sub: str
    groups: str
    question: str


TEMPLATES: tuple[Template, ...] = (
    Template("apples", "{name} has {n} apples.", "{name} picks {n} more apples.", "{name} eats {n} of the apples.",
             "{name} buys {n} bags with {m} apples in each.", "How many apples does {name} have now?"),
    Template("marbles", "{name} owns {n} marbles.", "A friend gives {name} {n} marbles.",
             "{name} loses {n} marbles in the park.", "{name} wins {n} games and gets {m} marbles for each win.",
             "How many marbles does {name} own now?"),
    Template("library", "A library shelf holds {n} books.", "The librarian puts {n} new books on the shelf.",
             "Readers borrow {n} books from the shelf.", "{n} boxes of {m} books each are unpacked onto the shelf.",
             "How many books are on the shelf now?"),
    Template("savings", "{name} has saved {n} dollars.", "{name} earns {n} dollars mowing lawns.",
             "{name} spends {n} dollars on a game.", "{name} works {n} days and earns {m} dollars each day.",
             "How many dollars does {name} have now?"),
    Template("cookies", "{name} bakes {n} cookies.", "{name} bakes another {n} cookies.",
             "{name} gives {n} cookies to the neighbours.", "{name} bakes {n} more trays of {m} cookies each.",
             "How many cookies does {name} have now?"),
    Template("stickers", "{name} has {n} stickers in an album.", "{name} trades for {n} new stickers.",
             "{name} gives away {n} stickers.", "{name} opens {n} packs with {m} stickers in each pack.",
             "How many stickers are in the album now?"),
    Template("pages", "{name} has read {n} pages of a book.", "The next day {name} reads {n} more pages.",
             "{name} realises {n} of those pages were read twice and does not count them.",
             "Over {n} evenings {name} reads {m} pages each evening.", "How many pages has {name} read in total?"),
    Template("parking", "There are {n} cars in a parking lot.", "{n} more cars drive in.", "{n} cars drive away.",
             "{n} buses arrive, each bringing {m} cars on a trailer.", "How many cars are in the parking lot now?"),
    Template("birds", "{n} birds sit on a tree.", "{n} more birds land on the tree.", "{n} birds fly away.",
             "{n} flocks of {m} birds each land on the tree.", "How many birds are on the tree now?"),
    Template("coins", "{name} has {n} coins in a jar.", "{name} finds {n} coins under the sofa.",
             "{name} uses {n} coins to buy a snack.", "{name} adds {n} stacks of {m} coins each to the jar.",
             "How many coins are in the jar now?"),
    Template("pencils", "A classroom has {n} pencils.", "The teacher brings {n} more pencils.",
             "The students break {n} pencils.", "The school sends {n} packs of {m} pencils.",
             "How many pencils does the classroom have now?"),
    Template("fish", "A tank holds {n} fish.", "{name} adds {n} fish to the tank.",
             "{name} moves {n} fish to another tank.", "{name} adds {n} bags of {m} fish each.",
             "How many fish are in the tank now?"),
)
TEMPLATE_NAMES = tuple(t.name for t in TEMPLATES)
_BY_NAME = {t.name: t for t in TEMPLATES}


def make_problem(template: str, level: int, index: int) -> Problem:
    """The problem ``index`` of ``template`` at difficulty ``level`` (deterministic: a seeded chain of operations)."""
    if level not in LEVELS:
        raise UserError(f"unknown difficulty level {level}; levels are {', '.join(map(str, LEVELS))}")
    t = _BY_NAME[template]
    rng = random.Random(f"{template}:{level}:{index}")  # str seeds hash deterministically (sha512)
    top = _MAX[level]
    name = rng.choice(_NAMES)
    x = rng.randint(2, top)
    sentences = [t.start.format(name=name, n=x)]
    steps = [f"Start with {x}."]
    for _ in range(level):
        kind = rng.choice(("add", "sub", "groups") if level > 1 else ("add", "sub"))
        if kind == "sub" and x < 2:
            kind = "add"
        if kind == "add":
            n = rng.randint(2, top)
            sentences.append(t.add.format(name=name, n=n))
            steps.append(f"{x} + {n} = {x + n}.")
            x += n
        elif kind == "sub":
            n = rng.randint(1, x - 1)
            sentences.append(t.sub.format(name=name, n=n))
            steps.append(f"{x} - {n} = {x - n}.")
            x -= n
        else:
            n, m = rng.randint(2, 6), rng.randint(2, 12)
            sentences.append(t.groups.format(name=name, n=n, m=m))
            steps.append(f"{n} x {m} = {n * m}, and {x} + {n * m} = {x + n * m}.")
            x += n * m
    question = " ".join(sentences + [t.question.format(name=name)])
    return Problem(f"{template}-L{level}-{index:05d}", question, Fraction(x), " ".join(steps) + f"\n#### {x}",
                   template)


def split_templates(seed: int, heldout_fraction: float) -> tuple[list[str], list[str]]:
    """(train, held-out) templates: shuffled by ``seed``, the last fraction held out (at least one on each side)."""
    names = list(TEMPLATE_NAMES)
    random.Random(seed).shuffle(names)
    k = min(max(1, round(len(names) * heldout_fraction)), len(names) - 1)
    return sorted(names[:-k]), sorted(names[-k:])


def generate_problems(templates: list[str], level: int, count: int, offset: int = 0) -> list[Problem]:
    """``count`` problems cycling over ``templates`` (indices from ``offset``), all at ``level``."""
    return [make_problem(templates[i % len(templates)], level, offset + i // len(templates)) for i in range(count)]


# ---------------------------------------------------------------------------------------------- GSM8K jsonl
def load_jsonl(path: str) -> list[Problem]:
    """Problems from a GSM8K-format jsonl file (one object a line with ``question`` and ``answer``, as
    :func:`tasks.math.answers.reference_answer` reads it; blank lines skipped); UserError naming file and line."""
    file = check_input_file(path, "--problems", "pass a GSM8K-format .jsonl: one JSON object per line with "
                                                "'question' and 'answer' fields")
    problems: list[Problem] = []
    for number, line in enumerate(read_utf8(file, f"--problems {path}").split("\n"), 1):
        where = f"{path}:{number}"
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"{where}: not valid JSON ({err.msg} at column {err.colno}); each line must be one "
                            "JSON object with 'question' and 'answer'") from None
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) \
                or not isinstance(row.get("answer"), (str, int, float)) or isinstance(row.get("answer"), bool):
            raise UserError(f"{where}: needs a JSON object with a string 'question' and an 'answer' (GSM8K: "
                            "the solution text ending in '#### n')")
        try:
            value, final = reference_answer(row["answer"])
        except ValueError as err:
            raise UserError(f"{where}: the answer {str(row['answer'])[-60:]!r} {err}; fix or remove that "
                            "line") from None
        answer_text = row["answer"] if isinstance(row["answer"], str) else ""
        solution = answer_text if "####" in answer_text else f"#### {final}"
        problems.append(Problem(f"p{len(problems):06d}", row["question"].strip(), value, solution, "file"))
    if len(problems) < 2:
        raise UserError(f"--problems {path} holds {len(problems)} problem(s); at least 2 are needed (a training and "
                        "a held-out one)")
    return problems


def split_problems(problems: list[Problem], seed: int, heldout_fraction: float) -> tuple[list[Problem],
                                                                                       list[Problem]]:
    """A user's problems split at random by ``seed`` into (train, held-out), at least one on each side."""
    order = list(range(len(problems)))
    random.Random(seed).shuffle(order)
    k = min(max(1, round(len(problems) * heldout_fraction)), len(problems) - 1)
    held = set(order[-k:])
    return ([p for i, p in enumerate(problems) if i not in held], [p for i, p in enumerate(problems) if i in held])
