"""Final answers of math solutions: parse a number out of free text and compare it with the known answer.

The final answer of a completion is, in order of precedence, the last ``\\boxed{...}``, the last ``#### n``, the
last "answer is n", else the last number in the text. Numbers may carry a sign, thousands commas, a decimal part, a
``$`` or a trailing ``%``; they compare exactly as fractions (``3.50`` == ``3.5`` == ``7/2`` is not parsed: a
fraction bar is read as two numbers). :func:`parse_answer` says which form it found, so that evaluation can count
"no number at all" (a format failure) apart from a wrong number.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

#: A number as written in word-problem answers: -1,234.50 / $12 / 7.
NUMBER = r"-?\$?\s?\d[\d,]*(?:\.\d+)?|-?\$?\s?\.\d+"
_NUMBER = re.compile(NUMBER)
_BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")
_HASHES = re.compile(r"####\s*(" + NUMBER + r")")
_ANSWER_IS = re.compile(r"answer\s*(?:is|:|=)\s*:?\s*(" + NUMBER + r")", re.IGNORECASE)

#: Forms of a final answer, most explicit first; "none" = no number anywhere (a format failure).
FORMS = ("boxed", "hashes", "answer_is", "last_number", "none")


@dataclass(frozen=True)
class ParsedAnswer:
    """The number a text ends on (None if it holds none) and the form it was written in (one of :data:`FORMS`)."""

    value: Fraction | None
    form: str

    @property
    def marked(self) -> bool:
        """Whether the answer was marked as final (boxed, ``####`` or "answer is"), not just the last number."""
        return self.form in ("boxed", "hashes", "answer_is")


def to_number(text: str) -> Fraction | None:
    """``"-1,234.50"`` / ``"$12"`` / ``"7"`` -> an exact Fraction; None if ``text`` is not one number."""
    cleaned = text.strip().replace(",", "").replace("$", "").replace(" ", "").rstrip("%").rstrip(".")
    if not re.fullmatch(r"-?(?:\d+(?:\.\d+)?|\.\d+)", cleaned):
        return None
    return Fraction(cleaned)


def parse_answer(text: str) -> ParsedAnswer:
    """The final answer of a solution text (see the module doc for the precedence of forms)."""
    for form, pattern in (("boxed", _BOXED), ("hashes", _HASHES), ("answer_is", _ANSWER_IS)):
        for found in reversed(pattern.findall(text)):
            if form == "boxed":
                numbers = _NUMBER.findall(found)
                value = to_number(numbers[-1]) if numbers else None
            else:
                value = to_number(found)
            if value is not None:
                return ParsedAnswer(value, form)
    numbers = _NUMBER.findall(text)
    for candidate in reversed(numbers):
        value = to_number(candidate)
        if value is not None:
            return ParsedAnswer(value, "last_number")
    return ParsedAnswer(None, "none")


def format_number(value: Fraction) -> str:
    """A Fraction as the shortest decimal text (``Fraction(7, 2)`` -> ``"3.5"``, ``Fraction(4)`` -> ``"4"``)."""
    if value.denominator == 1:
        return str(value.numerator)
    rest = value.denominator
    for prime in (2, 5):
        while rest % prime == 0:
            rest //= prime
    if rest == 1:  # a terminating decimal: written exactly (through a float, 772068.68 came out 772068.6800000001)
        with localcontext() as context:
            context.prec = len(str(value.numerator)) + len(str(value.denominator)) + 2
            text = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    else:  # a repeating decimal: 10 places
        text = f"{float(value):.10f}"
    return text.rstrip("0").rstrip(".")


def is_correct(completion: str, answer: Fraction) -> bool:
    """Whether the final answer of ``completion`` equals ``answer`` exactly."""
    return parse_answer(completion).value == answer


def score(completion: str, answer: Fraction, format_reward: float = 0.0) -> float:
    """Reward of one completion: 1 for a correct final answer, else 0; plus ``format_reward`` if the answer was
    marked as final (``####`` / boxed / "answer is"), whether right or wrong."""
    parsed = parse_answer(completion)
    return float(parsed.value == answer) + (format_reward if parsed.marked else 0.0)
