"""Units and words after a number, and number forms (lead_recipes.grading.equivalence.units, numbers, matrices, via
compare.prepare and the real math-verify): each right form equals the gold, and the same form holding a nearby
wrong value stays wrong; two different units are wrong; a decimal equals an exact value (a fraction, a constant)
only to the precision the problem states (lead_recipes.grading.equivalence.precision, through the real Grader) or else
the default relative precision 1e-4."""

from __future__ import annotations

import logging
import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lead_recipes.grading.equivalence.compare import prepare
from lead_recipes.grading.equivalence.precision import DEFAULT_REL_TOL, EXACT, number_verdict, stated_precision
from lead_recipes.grading.extraction.answers import normalize_answer
from lead_recipes.grading.pool.grader import Grader
from lead_recipes.grading.pool.worker import _judge

logging.getLogger("math_verify").setLevel(logging.ERROR)


def verdict(gold: str, pred: str, rel_tol: float = DEFAULT_REL_TOL, precision=None) -> bool:
    precision = precision or ("rel", rel_tol)
    (g, p), v = prepare(normalize_answer(gold), normalize_answer(pred), precision)
    return _judge(g, p, precision) if v is None else v


UNIT_FORMS = [
    "{v} \\mathrm{~cm}^{2}",
    "{v} \\mathrm{~km} / \\mathrm{h}",
    "\\text{{v} weeks}",
    "{v}\\text{''}",
    "{v} \\text{ miles per hour}",
    "{v} \\text{ percent}",
    "{v} weeks",
    "{v}weeks",
    "{v} cm^2",
    "{v}\\text{ cm}^2",
    "\\${v}",
    "{v}\\%",
    "{v} \\text{ students}",
    "{v}\\,\\mathrm{kg}",
    "{v} square units",
    "{v} km/h",
]


@pytest.mark.parametrize("form", UNIT_FORMS)
def test_a_unit_or_word_after_the_number_equals_a_gold_without_one_and_the_reverse(form):
    assert verdict("10", form.replace("{v}", "10")) and verdict(form.replace("{v}", "10"), "10")


@pytest.mark.parametrize("form", UNIT_FORMS)
def test_a_different_number_with_the_same_unit_stays_wrong(form):
    assert not verdict("10", form.replace("{v}", "11")) and not verdict(
        form.replace("{v}", "10"), form.replace("{v}", "12")
    )


@pytest.mark.parametrize(
    "gold,pred",
    [
        ("12\\text{ cm}", "12\\text{ mm}"),
        ("12 cm", "12 mm"),
        ("3\\text{ hours}", "3 minutes"),
        ("5 kg", "5 g"),
        ("12\\text{ cm}", "120\\text{ mm}"),
        ("60 \\mathrm{~km} / \\mathrm{h}", "60\\text{ m/s}"),
        ("10 \\mathrm{~cm}^{2}", "10\\text{ cm}"),
        ("8\\text{''}", "8\\text{ cm}"),
    ],
)
def test_two_different_units_are_wrong_even_for_equal_lengths(gold, pred):
    assert not verdict(gold, pred)


@pytest.mark.parametrize(
    "gold,pred",
    [
        ("12 inches", "12\\text{ in.}"),
        ("20\\text{ cm}^2", "20 square centimeters"),
        ("3\\text{ hours}", "3 hrs"),
        ("5 students", "5 people"),
    ],
)
def test_the_same_unit_spelled_differently_or_plain_words_are_equal(gold, pred):
    assert verdict(gold, pred)


@pytest.mark.parametrize("gold,pred", [("2\\pi", "2 pi"), ("10", "10x"), ("10", "10 x")])
def test_a_letter_or_function_name_after_a_number_is_not_a_unit(gold, pred):
    assert not verdict(gold, pred)


# ------------------------------------------------------------------------------------------------ number forms
@pytest.mark.parametrize("form", ["{w}\\frac{{{n}}}{{{d}}}", "{w} {n}/{d}", "{w}\\tfrac{{{n}}}{{{d}}}"])
@settings(max_examples=30, deadline=None)
@given(w=st.integers(1, 99), n=st.integers(1, 20), d=st.integers(2, 21), dn=st.sampled_from([0, 1]))
def test_a_mixed_number_is_whole_plus_fraction_and_a_nearby_one_is_not(form, w, n, d, dn):
    if n >= d:
        return
    gold = f"\\frac{{{w * d + n}}}{{{d}}}"
    pred = form.format(w=w + dn, n=n, d=d)
    assert verdict(gold, pred) == (dn == 0)
    assert verdict("-" + gold, "-" + pred) == (dn == 0)


@pytest.mark.parametrize(
    "gold,pred,same",
    [
        ("1000", "1,000", True),
        ("1000", "1{,}000", True),
        ("1234567", "1,234,567", True),
        ("1000", "1\\,000", True),
        ("1000", "1,001", False),
        ("1234567", "1,234,568", False),
        ("3.5", "3,5", True),
        ("3.5", "3,6", False),
        ("0.125", "0,125", True),
        ("3, 5", "3,5", True),  # a list gold: `3,5` is the list, not 3.5
        ("3.5", "3, 5", False),
        ("1.5; 2.5", "1,5; 2,5", True),
        ("1.5; 2.5", "1,5; 2,6", False),
        ("1000, 2000", "1,000, 2,000", True),
        ("1000, 2000", "1,000, 2,001", False),
    ],
)
def test_separators_are_read_by_what_the_other_side_is(gold, pred, same):
    assert verdict(gold, pred) is same


@pytest.mark.parametrize(
    "gold,pred,same",
    [
        ("\\begin{pmatrix}1\\\\-2\\end{pmatrix}", "[1, -2]", True),
        ("\\begin{pmatrix}1\\\\-2\\end{pmatrix}", "[1, 2]", False),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "[[1, 2], [3, 4]]", True),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "[[1, 3], [2, 4]]", False),  # transposed
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", True),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&5\\end{bmatrix}", False),
        ("(1, 2, 3)", "\\begin{pmatrix}1 & 2 & 3\\end{pmatrix}", True),
        ("(1, 2, 3)", "\\begin{pmatrix}1 & 3 & 2\\end{pmatrix}", False),
        ("[1, 2, 3]", "\\begin{pmatrix}1\\\\2\\\\3\\end{pmatrix}", True),
        ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1, 2)^T", True),
        ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "[1, 2]^{\\top}", True),
        ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(2, 1)^T", False),
    ],
)
def test_a_vector_or_matrix_in_another_notation_is_the_same_entries_in_the_same_places(gold, pred, same):
    assert verdict(gold, pred) is same


@pytest.mark.parametrize(
    "gold,pred,same",
    [
        ("\\frac13", "0.3333", True),
        ("\\frac13", "0.33333", True),
        ("\\frac13", "0.3334", False),
        ("\\frac13", "0.333", True),  # the digits written: 1/3 rounded to three places
        ("\\frac13", "0.33", False),  # two significant digits approximate nothing (precision.MIN_DIGITS)
        ("\\frac13", "0.3330", False),  # four places written, and 1/3 is 0.3333 to four
        ("\\frac13", "0.3", False),
        ("\\frac13", "0.33331", True),  # a truncation within 1e-4
        ("\\frac{2}{7}", "0.2857", True),
        ("\\frac{2}{7}", "0.2858", False),
        ("0.6667", "\\frac23", True),
        ("-\\frac13", "-0.3333", True),
        ("-\\frac13", "0.3333", False),
        ("\\frac18", "0.125", True),
        ("\\frac18", "0.1251", False),  # a terminating fraction is exact
        ("3", "2.9999", False),
    ],
)
def test_a_decimal_equals_a_non_terminating_fraction_to_its_digits_or_the_default_precision_only(gold, pred, same):
    assert verdict(gold, pred) is same


def test_a_stated_precision_widens_or_narrows_the_tolerance():
    assert verdict("\\frac13", "0.3", rel_tol=0.15) and not verdict("\\frac13", "0.3")
    assert verdict("\\frac13", "0.33331") and not verdict("\\frac13", "0.33331", rel_tol=1e-6)
    assert number_verdict("1/3", "0.5", ("rel", 0.0)) is False and number_verdict("1", "2", ("rel", 0.5)) is None


def test_the_grader_takes_the_relative_precision():
    with Grader(timeout_s=2.0, workers=1, rel_tol=0.15) as g:
        assert g.grade("\\frac13", given_answer="0.3").correct
    with pytest.raises(ValueError, match="rel_tol"):
        Grader(rel_tol=-1)


# No false positive: words that change the value, bound it or join a second one are never dropped; each
# refused form sits next to a right form the same words' neighbours keep (a unit or a count noun is still dropped).
@pytest.mark.parametrize(
    "gold,wrong,right",
    [
        ("5", "5 million", "5 meters"),
        ("5", "5\\text{ million}", "5\\text{ m}"),
        ("5", "5 factorial", "5 ways"),
        ("3", "3 squared", "3 students"),
        ("3", "3 halves", "3 hours"),
        ("3", "3\\text{ or more}", "3\\text{ days}"),
        ("2", "2 times pi", "2 such numbers"),
        ("2", "2 dozen", "2 dollars"),
        ("1", "1 over e", "1 unit"),
        ("4", "4 less than x", "4 distinct solutions"),
        ("10", "10 \\text{ thousand}", "10 \\text{ students}"),
        ("3", "3 more", "3 cm"),
    ],
)
def test_words_that_change_the_value_are_not_dropped_but_units_and_count_nouns_are(gold, wrong, right):
    assert not verdict(gold, wrong) and not verdict(wrong, gold)
    assert verdict(gold, right)


# No false positive: a two-item bracket gold is the closed interval, not a vector, whatever the answer.
@pytest.mark.parametrize(
    "pred", ["\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix}1 & 2\\end{pmatrix}", "(1, 2)"]
)
def test_a_two_item_bracket_gold_is_an_interval_not_a_vector(pred):
    assert not verdict("[1, 2]", pred) and verdict("[1, 2]", "[1,2]")


# A decimal comma is read in the prediction only; a gold written with one is the list it reads as.
@pytest.mark.parametrize(
    "gold,wrong,right", [("1,5", "1.5", "1,5"), ("-2,3", "-2.3", "-2,3"), ("1.5", "1,6", "1,5"), ("0.5", "0,6", "0,5")]
)
def test_a_decimal_comma_is_rewritten_on_the_prediction_side_only(gold, wrong, right):
    assert not verdict(gold, wrong) and verdict(gold, right)


# ------------------------------------------------------------------------------------------------ stated precision
@pytest.mark.parametrize(
    "problem,precision",
    [
        ("Express your answer as a decimal to the nearest hundredth.", ("places", 2)),
        ("What is the length of $AC$, to the nearest tenth of a centimeter?", ("places", 1)),
        ("Round your answer to the nearest whole number.", ("places", 0)),
        ("To the nearest dollar, how much more money did she earn?", ("places", 0)),
        ("Round to the nearest cent.", ("places", 2)),
        ("Round to the nearest ten thousand.", ("places", -4)),
        ("Express your answer to the nearest ten-thousandth.", ("places", 4)),
        ("Round your answer to the nearest square centimeter.", ("places", 0)),
        ("Rounded to 2 decimal places, what is $\\frac{7}{9}$?", ("places", 2)),
        ("Determine $r$ correct to one decimal place.", ("places", 1)),
        ("Give your answer to 3 significant figures.", ("sig", 3)),
        ("Compute $x$ to two significant digits.", ("sig", 2)),
        ("What is the nearest integer to $\\sqrt{50}$?", None),  # asks for an integer; no rounding stated
        ("The wheat is brought to the nearest point on the field's perimeter.", None),
        ("Alice rounds to the nearest ten-thousand, Bob to the nearest thousand.", None),  # several: about rounding
        ("Find $x$.", None),
        (None, None),
        ("Express your answer as a common fraction.", EXACT),
        ("Express your answer in terms of $\\pi$.", EXACT),
        ("Express your answer in simplest radical form.", EXACT),
        ("What is the exact value of $x$?", EXACT),
        ("Give $x$ to the nearest tenth, then as a fraction in lowest terms.", EXACT),  # an exact form wins
        ("Express your answer as a decimal.", None),
        ("In terms of cost, which is cheaper?", None),
    ],
)
def test_the_precision_a_problem_states_is_read_from_it(problem, precision):
    assert stated_precision(problem) == precision


# An answer is right when it rounds to the gold at the stated places; digits written beyond them must be
# checkable against the gold and right (0.3349 is wrong for 1/3, 3.1416 for a gold 3.14 given to 2 places, and
# 6287000 — a real rollout — for 6290000 to the nearest ten thousand). Each right value next to nearby wrong ones.
NEAREST_H = "Express it as a decimal to the nearest hundredth."


@pytest.mark.parametrize(
    "gold,problem,right,wrongs",
    [
        ("\\frac13", NEAREST_H, ["0.33", "0.333", "0.330"], ["0.34", "0.3", "0.335", "0.3349", "\\frac{33}{100}"]),
        ("\\frac23", "Round to the nearest thousandth.", ["0.667", "0.6667"], ["0.666", "0.67", "0.6666"]),
        ("3.14", "Give your answer to two decimal places.", ["3.14", "3.140"], ["3.15", "3.1", "3.13", "3.1416"]),
        ("0.78", "Rounded to 2 decimal places, what is $\\frac{7}{9}$?", ["\\frac{7}{9}", "0.78"], ["0.77", "0.8"]),
        ("\\frac17", "Give your answer to 3 significant figures.", ["0.143", "0.1429"], ["0.142", "0.14", "0.1428"]),
        ("6290000", "Round $6287215$ to the nearest ten thousand.", ["6290000", "6,290,000"], ["6287000", "6280000"]),
        ("1230", "Round to the nearest ten.", ["1230"], ["1240", "1200", "1234"]),
        ("\\$12.35", "Round to the nearest cent.", ["12.35", "\\$12.35"], ["12.3", "12.36", "12.354"]),
        ("42", "Round your answer to the nearest whole number.", ["42", "42.0"], ["43", "41.6", "41"]),
        ("\\pi", "Round to 2 decimal places.", ["3.14", "3.142", "3.1416"], ["3.15", "3.1415", "3.1"]),
        ("2\\sqrt{2}", "Round your answer to the nearest tenth.", ["2.8", "2.83"], ["2.9", "2.82", "3"]),
        ("24.5", "Round to the nearest tenth.", ["10\\sqrt{6}", "24.5"], ["10\\sqrt{5}", "24.4", "24.49"]),
    ],
)
def test_a_decimal_to_the_stated_precision_is_right_and_a_nearby_one_is_wrong(grader, gold, problem, right, wrongs):
    got = grader.grade_many([(gold, None, x, problem) for x in right + wrongs])
    assert [g.correct for g in got] == [True] * len(right) + [False] * len(wrongs)


@settings(max_examples=60, deadline=None)
@given(num=st.integers(1, 5000), den=st.integers(2, 999), places=st.integers(0, 4))
def test_the_gold_rounded_to_the_stated_places_is_right_and_one_unit_off_either_way_is_wrong(num, den, places):
    exact = Fraction(num, den)
    scaled = exact * 10**places
    rounded = math.floor(scaled + Fraction(1, 2))  # half away from zero (exact > 0)
    gold, precision = f"\\frac{{{num}}}{{{den}}}", ("places", places)

    def dec(k: int) -> str:
        return str(Decimal(k).scaleb(-places))  # k / 10^places written to `places` decimals

    assert number_verdict(gold, dec(rounded), precision) is True
    assert number_verdict(gold, dec(rounded - 1), precision) is False
    assert number_verdict(gold, dec(rounded + 1), precision) is False


# A decimal against a constant (`\pi`, `\sqrt2`) follows the same rule as against a fraction: the digits written or
# the relative precision 1e-4 when the problem states none (plain math-verify 0.9 wants 6 decimals: 3.1416 is wrong).
@pytest.mark.parametrize(
    "gold,pred,same",
    [
        ("\\pi", "3.1416", True),
        ("\\pi", "3.14159", True),
        ("\\pi", "3.14", True),  # the digits written
        ("\\pi", "3.13", False),
        ("\\pi", "3.1516", False),
        ("\\sqrt{2}", "1.4142", True),
        ("\\sqrt{2}", "1.4124", False),
        ("\\frac{\\sqrt{3}}{2}", "0.8660", True),
        ("\\frac{\\sqrt{3}}{2}", "0.8666", False),
        ("-\\sqrt{2}", "-1.4142", True),
        ("-\\sqrt{2}", "1.4142", False),
        ("e^{2}", "7.389", True),
        ("\\pi", "3", False),  # an integer is no approximation
        ("45^\\circ", "0.7854", False),  # degrees: math-verify reads the unit
        ("\\frac{\\pi}{4}", "45^\\circ", False),
    ],
)
def test_a_decimal_against_a_constant_follows_the_rule_for_fractions(gold, pred, same):
    assert verdict(gold, pred) is same


# No false positive: math-verify reads `2 \text{ hours and } 30 \text{ minutes}` as 2, dropping
# everything after the first unit; a value that goes on after its unit is a compound and equals no single value.
@pytest.mark.parametrize(
    "pred",
    [
        "2 \\text{ hours and } 30 \\text{ minutes}",
        "2\\text{ h } 30\\text{ min}",
        "2\\,\\text{cm} \\times 4\\,\\text{cm}",
        "2 \\text{ cm} + 3 \\text{ cm}",
        "2 \\text{ apples}, 4 \\text{ pears}",
        "2 \\text{ cm} \\text{ by } 5 \\text{ cm}",
    ],
)
def test_a_value_that_goes_on_after_its_unit_equals_no_single_value(pred):
    assert not verdict("2", pred) and not verdict(pred, "2") and verdict(pred, pred)


# Units on the items of a list are dropped item by item, labels kept; a wrong item stays wrong.
@pytest.mark.parametrize(
    "gold,pred,same",
    [
        ("3, 4", "3 \\text{ cm}, 4 \\text{ students}", True),
        ("3, 4", "3 \\text{ cm}, 5 \\text{ students}", False),
        ("x = 2 \\text{ cm}, y = 3 \\text{ cm}", "x = 2, y = 3", True),
        ("x = 2 \\text{ cm}, y = 3 \\text{ cm}", "x = 2, y = 4", False),
        ("2 \\text{ cm}, 3 \\text{ cm}", "2 \\text{ mm}, 3 \\text{ mm}", False),
    ],
)
def test_units_on_list_items_are_dropped_item_by_item(gold, pred, same):
    assert verdict(gold, pred) is same


# A currency or cent sign is a unit (`\$50` is 50 dollars, not 50 cents), a unit's power may sit in
# its box (`\mathrm{cm^2}`), and degrees Celsius / Fahrenheit and `°` are units too.
@pytest.mark.parametrize(
    "gold,right,wrongs",
    [
        ("\\$50", "50 \\text{ dollars}", ["50 \\text{ cents}", "50¢", "51 \\text{ dollars}"]),
        ("20", "20¢", ["21¢"]),
        ("20¢", "20 \\text{ cents}", ["\\$20", "20 \\text{ dollars}"]),
        ("10", "10\\mathrm{cm^2}", ["11\\mathrm{cm^2}"]),
        ("10 \\text{ cm}^2", "10\\,\\mathrm{cm^{2}}", ["10\\,\\mathrm{cm^{3}}", "10\\text{ cm}"]),
        ("45", "45^{\\circ}\\mathrm{C}", ["46^{\\circ}\\mathrm{C}"]),
        ("45", "45 °C", ["44 °C"]),
        ("45^\\circ \\text{C}", "45^\\circ C", ["45^\\circ F", "46^\\circ C"]),
        ("45", "45°", ["54°"]),
    ],
)
def test_currency_signs_powers_in_the_box_and_degrees_are_units(gold, right, wrongs):
    assert verdict(gold, right) and verdict(right, gold)
    assert not any(verdict(gold, w) for w in wrongs)


# A repeating decimal (`0.\overline{3}`, `0.1\overline{6}`) is the exact fraction it writes, both
# ways; the terminating decimal or fraction next to it is not.
@pytest.mark.parametrize(
    "exact,repeating,wrongs",
    [
        ("\\frac13", "0.\\overline{3}", ["\\frac{3}{10}", "\\frac{33}{100}", "0.3"]),
        ("\\frac16", "0.1\\overline{6}", ["\\frac{17}{100}", "\\frac{1}{7}"]),
        ("\\frac{4}{11}", "0.\\overline{36}", ["\\frac{9}{25}"]),
        ("\\frac43", "1.\\overline{3}", ["\\frac{13}{10}"]),
        ("-\\frac{1}{3}", "-0.\\bar{3}", ["\\frac{1}{3}"]),
        ("\\frac{1}{7}", "0.\\overline{142857}", ["\\frac{1}{8}"]),
    ],
)
def test_a_repeating_decimal_is_the_fraction_it_writes(exact, repeating, wrongs):
    assert verdict(exact, repeating) and verdict(repeating, exact)
    assert not any(verdict(w, repeating) or verdict(repeating, w) for w in wrongs)
