"""Units and words after a number, and number forms (lead_recipes.grading.units, numbers, matrices, via
compare.prepare and the real math-verify): each right form equals the gold, and the same form holding a nearby
wrong value stays wrong; two different units are wrong; a decimal equals a fraction whose expansion does not end
only to the stated or default relative precision (1e-4)."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lead_recipes.grading.answers import normalize_answer
from lead_recipes.grading.compare import prepare
from lead_recipes.grading.grader import Grader
from lead_recipes.grading.numbers import DEFAULT_REL_TOL, approx_verdict
from lead_recipes.grading.worker import _judge

logging.getLogger("math_verify").setLevel(logging.ERROR)


def verdict(gold: str, pred: str, rel_tol: float = DEFAULT_REL_TOL) -> bool:
    (g, p), v = prepare(normalize_answer(gold), normalize_answer(pred), rel_tol)
    return _judge(g, p) if v is None else v


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
        ("\\frac13", "0.333", False),
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
def test_a_decimal_equals_a_non_terminating_fraction_to_the_default_precision_only(gold, pred, same):
    assert verdict(gold, pred) is same


def test_a_stated_precision_widens_or_narrows_the_tolerance():
    assert verdict("\\frac13", "0.33", rel_tol=0.02) and not verdict("\\frac13", "0.33")
    assert not verdict("\\frac13", "0.3333", rel_tol=1e-6)
    assert approx_verdict("1/3", "0.5", 0.0) is False and approx_verdict("1", "2", 0.5) is None


def test_the_grader_takes_the_relative_precision():
    with Grader(timeout_s=2.0, workers=1, rel_tol=0.02) as g:
        assert g.grade("\\frac13", given_answer="0.33").correct
    with pytest.raises(ValueError, match="rel_tol"):
        Grader(rel_tol=-1)


# Issue 21 (false positives): words that change the value, bound it or join a second one are never dropped; each
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


# Issue 21 (false positive): a two-item bracket gold is the closed interval, not a vector, whatever the answer.
@pytest.mark.parametrize(
    "pred", ["\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\begin{pmatrix}1 & 2\\end{pmatrix}", "(1, 2)"]
)
def test_a_two_item_bracket_gold_is_an_interval_not_a_vector(pred):
    assert not verdict("[1, 2]", pred) and verdict("[1, 2]", "[1,2]")


# Issue 21: a decimal comma is read in the prediction only; a gold written with one is the list it reads as.
@pytest.mark.parametrize(
    "gold,wrong,right", [("1,5", "1.5", "1,5"), ("-2,3", "-2.3", "-2,3"), ("1.5", "1,6", "1,5"), ("0.5", "0,6", "0,5")]
)
def test_a_decimal_comma_is_rewritten_on_the_prediction_side_only(gold, wrong, right):
    assert not verdict(gold, wrong) and verdict(gold, right)
