"""Final answers of math solutions: parse a number out of free text and compare it with the known answer.

The final answer of a completion is, in order of precedence, the last ``\\boxed{...}``, the last ``#### n``, the
last "answer is n", else the last number in the text. Numbers may carry a sign, thousands commas, a decimal part, a
``$`` or a trailing ``%``; they compare exactly as fractions (``3.50`` == ``3.5``). A marked answer (boxed, ``####``,
"answer is") is read whole: ``7/2`` is a fraction and ``1e3`` a power of ten there (a value beyond the float range
is no number); an unmarked last number is read as written (a fraction bar between two numbers is two numbers).
:func:`parse_answer` says which form it found, so that evaluation can count "no number at all" (a format failure)
apart from a wrong number. :func:`exact_number` reads a problem file's reference answer, refusing what it cannot
read whole.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

#: A number as written in word-problem answers: -1,234.50 / $12 / 7.
NUMBER = r"-?\$?\s?\d[\d,]*(?:\.\d+)?|-?\$?\s?\.\d+"
_NUMBER = re.compile(NUMBER)
#: A marked answer: a number, optionally with a decimal exponent and / or a fraction bar and a denominator.
WHOLE_NUMBER = r"(?:" + NUMBER + r")(?:[eE][+-]?\d+)?(?:\s?/\s?\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?)?"
_WHOLE_NUMBER = re.compile(WHOLE_NUMBER)
_BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")
_HASHES = re.compile(r"####\s*(" + WHOLE_NUMBER + r")")
_ANSWER_IS = re.compile(r"answer\s*(?:is|:|=)\s*:?\s*(" + WHOLE_NUMBER + r")", re.IGNORECASE)
_PLAIN = r"(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?"
_EXACT = re.compile(rf"(-?)({_PLAIN})(?:/({_PLAIN}))?")

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


def exact_number(text: str) -> Fraction:
    """One whole number written as text -> an exact Fraction: ``"-1,234.50"``, ``"$12"``, ``"7/2"``, ``"2.5e-3"``;
    ValueError saying why not (not one number, not finite, a zero denominator), for the caller to name file and line."""
    cleaned = text.strip().replace(",", "").replace("$", "").replace(" ", "").rstrip("%").rstrip(".")
    if cleaned.lstrip("+-").lower() in ("inf", "infinity", "nan"):
        raise ValueError("is not finite")
    found = _EXACT.fullmatch(cleaned)
    if found is None:
        raise ValueError("is not one number (write it as 42, -3.5, 1,234, 7/2 or 2.5e-3)")
    parts = [found[2]] + ([found[3]] if found[3] else [])
    if not all(math.isfinite(float(part)) for part in parts):
        raise ValueError("is not finite (beyond the float range)")
    value = Fraction(parts[0])
    if len(parts) == 2:
        if Fraction(parts[1]) == 0:
            raise ValueError("divides by zero")
        value /= Fraction(parts[1])
    return -value if found[1] else value


def reference_answer(answer: str | int | float) -> tuple[Fraction, str]:
    """A problem file's answer -> (exact value, the final number's text): the number after the last ``####`` (GSM8K),
    a bare number (text or JSON), or the last number of a text, read whole; ValueError says why it cannot be read."""
    if isinstance(answer, float) and not math.isfinite(answer):
        raise ValueError("has no parsable final number: it is not finite")
    if not isinstance(answer, str):
        return exact_number(str(answer)), format_number(exact_number(str(answer)))
    if "####" in answer:
        final = answer.rsplit("####", 1)[1].strip()
        if not final:
            raise ValueError("has no parsable final number (nothing after its last '####')")
        try:
            return exact_number(final), final
        except ValueError as err:
            raise ValueError(f"has no parsable final number: {final[:40]!r} after its last '####' {err}") from None
    try:
        return exact_number(answer), answer.strip()
    except ValueError:
        pass
    numbers = _WHOLE_NUMBER.findall(answer)
    if not numbers:
        raise ValueError("has no parsable final number (GSM8K writes it as '#### 42' at the end)")
    return exact_number(numbers[-1]), numbers[-1].strip()


def parse_answer(text: str) -> ParsedAnswer:
    """The final answer of a solution text (see the module doc for the precedence of forms)."""
    for form, pattern in (("boxed", _BOXED), ("hashes", _HASHES), ("answer_is", _ANSWER_IS)):
        for found in reversed(pattern.findall(text)):
            if form == "boxed":  # the last number inside the box ("" when there is none: no number)
                found = (_WHOLE_NUMBER.findall(found) or [""])[-1]
            try:
                return ParsedAnswer(exact_number(found), form)
            except ValueError:  # not one finite number: an earlier one of this form may be
                continue
    for candidate in reversed(_NUMBER.findall(text)):
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


def score(completion: str, answer: Fraction, format_reward: float = 0.0) -> float:
    """Reward of one completion: 1 for a correct final answer, else 0; plus ``format_reward`` if the answer was
    marked as final (``####`` / boxed / "answer is"), whether right or wrong."""
    parsed = parse_answer(completion)
    return float(parsed.value == answer) + (format_reward if parsed.marked else 0.0)
