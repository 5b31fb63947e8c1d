"""Answer parsing of math solutions: property tests over generated numbers and surrounding text."""
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.math.answers import format_number, parse_answer, score, to_number

numbers = st.one_of(st.integers(-10**9, 10**9).map(Fraction),
                    st.decimals(-10**6, 10**6, places=2, allow_nan=False, allow_infinity=False).map(Fraction))
# text without digits (so the only number in it is the one we put there)
words = st.text(st.characters(blacklist_categories=("Nd", "Cs"), blacklist_characters="\\{}#$-.,%"), max_size=40)


def with_commas(value: Fraction) -> str:
    text = format_number(value)
    sign, body = ("-", text[1:]) if text.startswith("-") else ("", text)
    whole, _, frac = body.partition(".")
    return sign + f"{int(whole):,}" + (f".{frac}" if frac else "")


@settings(max_examples=200, deadline=None)
@given(numbers)
def test_format_number_roundtrips(value):
    assert to_number(format_number(value)) == value
    assert to_number(with_commas(value)) == value


@settings(max_examples=200, deadline=None)
@given(words, numbers, words)
def test_last_number_is_the_answer(before, value, after):
    parsed = parse_answer(f"{before} 3 and 7 then {format_number(value)} {after}")
    assert parsed.value == value and parsed.form == "last_number" and not parsed.marked


@settings(max_examples=200, deadline=None)
@given(words, numbers, numbers)
def test_hashes_win_over_a_later_number(text, value, other):
    parsed = parse_answer(f"{text}\n#### {with_commas(value)}\nI checked it with {format_number(other)} twice.")
    assert parsed.value == value and parsed.form == "hashes" and parsed.marked


@settings(max_examples=200, deadline=None)
@given(words, numbers, numbers)
def test_boxed_wins_over_hashes(text, value, other):
    parsed = parse_answer(f"#### {format_number(other)} {text} so \\boxed{{{format_number(value)}}} .")
    assert parsed.value == value and parsed.form == "boxed"


@settings(max_examples=100, deadline=None)
@given(words)
def test_text_without_a_number_is_a_format_failure(text):
    parsed = parse_answer(text)
    assert parsed.value is None and parsed.form == "none"
    assert score(text, Fraction(1), format_reward=0.5) == 0.0


def test_forms_seen_in_model_output():
    assert parse_answer("The answer is $1,234.").value == 1234
    assert parse_answer("so she has 33 apples.\n#### 33").value == 33
    assert parse_answer("Total: \\boxed{\\$12.50}").value == Fraction("12.5")
    assert parse_answer("the answer is: -7").value == -7
    assert parse_answer("20 + 13 = 33 apples").value == 33
    assert parse_answer("12%").value == 12
    assert parse_answer("#### 3.50").value == Fraction(7, 2)
    assert parse_answer("20 - 13 = 7\n#### 7").value == Fraction(7) and parse_answer("#### 8").value != Fraction(7)


def test_score_adds_the_format_reward_only_for_marked_answers():
    assert score("#### 7", Fraction(7), 0.1) == 1.1
    assert score("#### 8", Fraction(7), 0.1) == 0.1
    assert score("it is 7", Fraction(7), 0.1) == 1.0
