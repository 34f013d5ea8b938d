"""Answer forms a careful human accepts and plain math-verify does not (lead_recipes.grading.equivalence.forms): one
property per test, then the reverse property for every form — the same form holding a perturbed value stays wrong
(hypothesis). Verdicts come from the real math-verify (in this process for the property tests, in the pool for the
wiring test)."""

from __future__ import annotations

import logging
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from lead_recipes.grading.equivalence.compare import prepare
from lead_recipes.grading.equivalence.forms import align_forms
from lead_recipes.grading.extraction.answers import normalize_answer
from lead_recipes.grading.pool.grader import Grader
from lead_recipes.grading.pool.worker import _judge

logging.getLogger("math_verify").setLevel(logging.ERROR)


def verdict(gold: str, pred: str) -> bool:
    """What the Grader decides for an extracted answer, without the pool: rewrites, exact paths, then math-verify."""
    (g, p), v = prepare(normalize_answer(gold), normalize_answer(pred))
    return _judge(g, p) if v is None else v


# ------------------------------------------------------------------------------------------------ one form each
def test_a_list_inside_one_text_box_equals_the_bare_list():
    assert verdict(r"\text{B,C}", "B, C") and verdict("B, C", r"\text{B, C}")


def test_function_labels_on_a_list_equal_the_bare_values_in_order():
    assert verdict("9, 2", "T(4)=9, T(5)=2") and verdict("T(4)=9, T(5)=2", "9, 2")


def test_labelled_values_keep_their_order():
    assert not verdict("p=3, q=7", "7, 3")


def test_a_labelled_tuple_is_read_label_by_label():
    assert not verdict("x=1, y=2", "(x,y)=(2,1)") and verdict("x=1, y=2", "(x, y) = (1, 2)")


def test_two_labelled_lists_are_matched_by_label_not_position():
    assert verdict("x=1, y=2", "y=2, x=1") and not verdict("x=1, y=2", "y=1, x=2")


def test_labels_out_of_canonical_order_against_a_bare_tuple_are_not_reordered_into_a_match():
    assert not verdict("(1,2)", "y=1, x=2") and verdict("(1,2)", "x=1, y=2")


def test_segment_labels_keep_their_order():
    assert not verdict("7, 5", "AB=5, BC=7") and not verdict("AB=5, BC=7", "7, 5") and verdict("AB=5, BC=7", "5, 7")


def test_a_repeated_label_is_a_solution_list_whose_order_does_not_matter():
    assert verdict("x=1, x=2", "2, 1")


def test_a_renamed_function_variable_is_the_same_function():
    assert verdict("g(x)=x^2+1", "g(t)=t^2+1") and verdict("x^2+1", "g(t)=t^2+1")


def test_renaming_onto_a_name_already_used_is_refused():
    assert not verdict("g(x)=x+1", "g(t)=t+x")


def test_an_inequality_equals_its_interval_either_way_round():
    assert verdict(r"(2,\infty)", "m > 2") and verdict(r"[-3,1)", r"-3 \le x < 1")


def test_set_builder_notation_equals_its_interval():
    assert verdict("(0,4)", r"\{x \mid 0<x<4\}") and verdict(r"\{x : 0<x<4\}", "(0,4)")


def test_a_union_of_inequalities_equals_the_union_of_intervals():
    assert verdict(r"(-\infty,-1) \cup (2,\infty)", r"x<-1 \text{ or } x>2")


def test_a_column_vector_equals_the_tuple_of_its_entries():
    assert verdict(r"(1,-2)", r"\begin{pmatrix}1\\-2\end{pmatrix}")
    assert verdict(r"\begin{bmatrix}1\\-2\\3\end{bmatrix}", r"\langle 1,-2,3\rangle")


def test_ordered_tuples_stay_ordered():
    assert not verdict("(1,2)", "(2,1)") and not verdict(r"\begin{pmatrix}1\\2\end{pmatrix}", "(2,1)")


def test_solution_lists_are_unordered():
    assert verdict("1, 2", "2, 1") and verdict("1, 2", r"x=2 \text{ or } x=1")


def test_degrees_and_minutes_equal_decimal_degrees():
    assert verdict(r"30^\circ 15'", r"30.25^\circ") and verdict("30.25", r"30^{\circ}15'")


def test_the_same_formula_spelled_with_other_spacing_or_text_names_is_equal():
    assert verdict(r"\text{ML} \perp \text{NK}", r"ML\perp NK") and verdict(r"\left( 1, 2 \right)", "(1,2)")


def test_words_inside_text_keep_their_spaces():
    assert not verdict(r"\text{not a} \perp x", r"\text{nota} \perp x")


def test_bold_digits_spaced_inside_mathbf_are_one_number():
    assert verdict("25", r"\mathbf{2 5}") and verdict(r"\frac{9}{25}", r"\frac{\mathbf{9}}{\mathbf{2 5}}")
    assert verdict("11", r"\mathbf{1 1 .}")


def test_a_trailing_domain_qualifier_is_dropped():
    assert verdict("(a, n) = (a, 1)", r"(a, 1) \text{ for any positive integer } a")
    assert verdict("(a,1)", "(a, 1) for any positive integer a")


def test_units_words_percent_and_currency_are_read():
    assert verdict(r"4\sqrt{2}\text{ cm}", r"4\sqrt2") and verdict(r"50\%", "50") and verdict(r"\$7.00", "7")


def test_the_grader_applies_the_rewrites():
    pairs = [
        ("9, 2", "T(4)=9, T(5)=2"),
        ("(0,4)", r"\{x \mid 0<x<4\}"),
        ("(1,-2)", r"\begin{pmatrix}1\\-2\end{pmatrix}"),
        ("g(x)=x^2+1", "g(t)=t^2+1"),
        (r"30^\circ 15'", r"30.25^\circ"),
        (r"\text{B,C}", "B, C"),
    ]
    with Grader(timeout_s=2.0, workers=1) as g:
        assert [x.status for x in g.grade_many([(a, None, b) for a, b in pairs])] == ["correct"] * len(pairs)


def test_unreadable_forms_are_left_unchanged():
    for pair in [("x^2", "y^2"), (r"\{x \mid x^2 < 4\}", "(-2,2)"), ("a < x > b", "(a,b)"), ("", "")]:
        assert align_forms(*pair) == pair


# ---------------------------------------------------------------------------------------- a wrong value stays wrong
ints = st.integers(-50, 50)
nonzero = st.integers(-9, 9).filter(bool)


def _forms(draw, wrong: bool) -> tuple[str, str]:
    """(gold in one form, answer in another form), the answer's value perturbed when `wrong`."""
    kind = draw(
        st.sampled_from(
            [
                "text_list",
                "labels",
                "function",
                "interval",
                "setbuilder",
                "vector",
                "dms",
                "tuple_order",
                "spelling",
                "qualifier",
                "bold",
            ]
        )
    )
    d = draw(nonzero) if wrong else 0
    if kind == "text_list":
        letters = draw(st.lists(st.sampled_from("ABCDE"), min_size=2, max_size=3, unique=True))
        other = [chr(ord(letters[-1]) + 5)] if wrong else [letters[-1]]
        return r"\text{" + ",".join(letters) + "}", ", ".join(letters[:-1] + other)
    if kind == "labels":
        vals = draw(st.lists(ints, min_size=2, max_size=3))
        got = list(vals)
        got[draw(st.integers(0, len(vals) - 1))] += d
        return ", ".join(f"T({i + 1})={v}" for i, v in enumerate(vals)), ", ".join(map(str, got))
    if kind == "function":
        a, b = draw(nonzero), draw(ints)
        return f"g(x)={a}x^2+{b}", f"g(t)={a}t^2+{b + d}"
    if kind in ("interval", "setbuilder"):
        lo = draw(ints)
        hi = lo + draw(st.integers(1, 20))
        lc, hc = draw(st.booleans()), draw(st.booleans())
        flip_bracket = wrong and draw(st.booleans())
        if flip_bracket:
            lc = not lc
        lo_p = lo if flip_bracket else lo + d
        gold = f"{'[' if lc != flip_bracket else '('}{lo},{hi}{']' if hc else ')'}"
        le, lt = "\\le", "<"
        ineq = f"{lo_p} {le if lc else lt} x {le if hc else lt} {hi}"
        return gold, (ineq if kind == "interval" else f"\\{{x \\mid {ineq}\\}}")
    if kind == "vector":
        vals = draw(st.lists(ints, min_size=2, max_size=3))
        got = list(vals)
        got[draw(st.integers(0, len(vals) - 1))] += d
        return r"\begin{pmatrix}" + r"\\".join(map(str, vals)) + r"\end{pmatrix}", "(" + ", ".join(map(str, got)) + ")"
    if kind == "dms":
        deg, mins = draw(st.integers(0, 359)), draw(st.integers(1, 59))
        v = Fraction(deg) + Fraction(mins + d, 60)
        return f"{deg}^\\circ {mins}'", f"\\frac{{{v.numerator}}}{{{v.denominator}}}^\\circ"
    a, b = draw(ints), draw(ints)
    if a == b:
        b = a + 1
    if kind == "spelling":
        return rf"\text{{AB}} = {a}\perp \text{{CD}}", rf"AB={a + d} \perp  CD"
    if kind == "bold":
        v = abs(a) + 10
        return str(v), r"\mathbf{" + " ".join(str(v + abs(d))) + "}"
    if kind == "qualifier":
        return f"(k, {a})", rf"(k, {a + d}) \text{{ for any integer }} k"
    return f"({a},{b})", f"({b},{a})" if wrong else f"({a}, {b})"


@st.composite
def right_pairs(draw):
    return _forms(draw, wrong=False)


@st.composite
def wrong_pairs(draw):
    return _forms(draw, wrong=True)


@settings(max_examples=60, deadline=None)
@given(right_pairs())
def test_every_form_with_the_right_value_is_correct(pair):
    assert verdict(*pair), pair


@settings(max_examples=60, deadline=None)
@given(wrong_pairs())
def test_every_form_with_a_perturbed_value_stays_wrong(pair):
    assert not verdict(*pair), pair


_ATOMS = list(r"\{}()[]$=<>,.;:^_ -+0123456789xyABabcdefghilmnoprstq'|&") + [
    "\\le",
    "\\text{",
    "\\begin{pmatrix}",
    "\\end{pmatrix}",
    "\\mid",
    "\\circ",
    "\\\\",
    "\\mathbf{",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), max_size=60).map("".join), st.text(max_size=40))
def test_arbitrary_text_never_raises_and_identical_text_is_unchanged(a, b):
    for g, p in ((a, b), (b, a), (a, a)):
        out = align_forms(g, p)
        assert isinstance(out, tuple) and all(isinstance(x, str) for x in out)
    assert align_forms(a, a) == (a, a)
