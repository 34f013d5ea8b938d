"""What released checkpoints and policies that stop boxing write (issue 35; docs/grading.md): no tolerance between
two exact forms, one rule for approximations in every structure, turn markers and prompt echoes, the last stated
value, dataset answer lines, bare braced golds, equation and labelled-form pairs. Each right form sits next to the
same form holding a wrong value. math-verify runs in this process (`_judge`), as in test_units_numbers.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lead_recipes.grading.equivalence.compare import prepare
from lead_recipes.grading.equivalence.precision import DEFAULT_REL_TOL, stated_precision
from lead_recipes.grading.extraction.answers import EXTRACTION_POLICIES, extract_final_answer
from lead_recipes.grading.extraction.turns import QUESTION_LABEL, TURN_LABELS, TURN_TOKENS
from lead_recipes.grading.pool.worker import _judge


def verdict(gold: str, pred: str, precision=("rel", DEFAULT_REL_TOL)) -> bool:
    (g, p), v = prepare(gold, pred, precision)
    return _judge(g, p, precision) if v is None else v


@pytest.mark.parametrize(
    "gold,pred",
    [
        ("1+2^{-2020}", "1"),
        ("1", "1+2^{-2020}"),
        ("\\frac{3-3^{-999}}{4}", "\\frac{3}{4}+\\frac{1}{4\\cdot 3^{1000}}"),
        ("10^{-30}", "0"),
        ("\\sqrt{2}+10^{-40}", "\\sqrt{2}"),
        ("(\\frac{1}{2}, 3^{-50})", "(\\frac{1}{2}, 0)"),
        ("\\begin{pmatrix}1 & 2^{-80}\\end{pmatrix}", "\\begin{pmatrix}1 & 0\\end{pmatrix}"),
        ("x+1+2^{-100}", "x+1"),
    ],
)
def test_two_exact_forms_that_differ_by_a_tiny_amount_are_wrong(gold, pred):
    assert verdict(gold, pred) is False


@pytest.mark.parametrize(
    "gold,pred",
    [
        ("1+2^{-2020}", "2^{-2020}+1"),
        ("\\frac{3-3^{-999}}{4}", "\\frac{3}{4}-\\frac{1}{4\\cdot 3^{999}}"),
        ("\\sqrt{7+4\\sqrt{3}}", "2+\\sqrt{3}"),
        ("(\\frac{1}{2}, 3^{-50})", "(0.5, 3^{-50})"),
    ],
)
def test_two_exact_forms_of_one_value_stay_equal(gold, pred):
    assert verdict(gold, pred) is True


# The rule: a decimal approximates a value whose expansion does not end when it is that value rounded to the places
# it writes (at least three significant digits), or within rel_tol; the same in numbers, tuples, sets, intervals and
# matrices. Each row: gold, the right approximation, wrong ones of the same shape.
@pytest.mark.parametrize(
    "gold,right,wrongs",
    [
        ("\\frac{2}{3}", "0.667", ["0.666", "0.67", "0.7", "0.668"]),
        ("\\ln 3", "1.099", ["1.098", "1.09"]),
        ("[\\frac14, \\frac{10}{7})", "[0.25, 1.4286)", ["[0.25, 1.42)", "[0.25, 1.4286]", "[0.26, 1.4286)"]),
        ("(\\frac23, \\frac25)", "(0.667, 0.4)", ["(0.67, 0.4)", "(0.666, 0.4)", "(0.4, 0.667)", "(0.667, 0.41)"]),
        (
            "\\begin{pmatrix}\\frac13 & \\frac12\\end{pmatrix}",
            "\\begin{pmatrix}0.333 & 0.5\\end{pmatrix}",
            ["\\begin{pmatrix}0.33 & 0.5\\end{pmatrix}", "\\begin{pmatrix}0.334 & 0.5\\end{pmatrix}"],
        ),
        ("(\\sqrt{2}, \\pi)", "(1.41, 3.14)", ["(1.41, 3.15)", "(1.42, 3.14)"]),
        ("\\{\\frac{1}{7}, 2\\}", "\\{2, 0.143\\}", ["\\{2, 0.142\\}"]),
    ],
)
def test_an_approximation_is_right_to_the_digits_it_writes_in_every_structure(gold, right, wrongs):
    assert verdict(gold, right) is True
    assert [w for w in wrongs if verdict(gold, w)] == []


def test_a_terminating_value_and_an_integer_are_never_approximated():
    assert verdict("\\frac18", "0.13") is False and verdict("\\frac18", "0.125") is True
    assert verdict("\\pi", "3") is False


def test_a_stated_precision_replaces_the_digits_written():
    stated = ("places", 3)
    assert verdict("\\frac23", "0.667", stated) is True
    assert verdict("\\frac23", "0.67", stated) is False


@pytest.mark.parametrize("policy", EXTRACTION_POLICIES)
@pytest.mark.parametrize("marker", [*TURN_TOKENS, *(f"\n{label}" for label in TURN_LABELS)])
def test_no_answer_is_read_after_a_turn_marker(policy, marker):
    after = f"So the answer is $\\boxed{{3}}$.{marker} next\nThe answer is $\\boxed{{9}}$."
    assert extract_final_answer(after, policy) == "3"
    only_after = f"We try the cases.{marker} next\nThe answer is $\\boxed{{9}}$."
    assert extract_final_answer(only_after, policy) is None


def test_a_role_word_inside_a_line_is_no_turn_marker():
    text = "The User: field is ignored here, and the answer is $\\boxed{4}$."
    assert extract_final_answer(text, "boxed") == "4"


PROBLEM = "A tank holds 120 litres and drains 8 litres a minute. How long until it is empty?"


@pytest.mark.parametrize("policy", EXTRACTION_POLICIES)
def test_an_echo_of_the_problem_after_the_answer_ends_the_response(policy):
    text = f"It drains for 120 / 8 = 15 minutes, so $\\boxed{{15}}$.\n\n{PROBLEM}\nThe answer is $\\boxed{{16}}$."
    assert extract_final_answer(text, policy, problem=PROBLEM) == "15"
    assert extract_final_answer(text, policy) == "16"  # without the problem there is nothing to recognise


def test_a_step_quoting_the_problem_is_no_echo():
    text = "1. A tank holds 120 litres and drains 8 a minute.\n2. A tank holds 120 litres, so it takes 15 minutes.\n"
    assert extract_final_answer(text + "So the answer is $\\boxed{15}$.", "boxed", problem=PROBLEM) == "15"
    # not cut after "So $12$.": the quoted steps repeat part of the problem, not all of it
    assert extract_final_answer("So $12$.\n" + text, "final_answer", problem=PROBLEM) == "15\\text{ minutes}"


def test_a_restatement_of_the_problem_before_the_answer_is_no_echo():
    text = f"Restating the problem:\n{PROBLEM}\nIt drains 120 / 8 minutes, so $\\boxed{{15}}$."
    assert extract_final_answer(text, "boxed", problem=PROBLEM) == "15"


@pytest.mark.parametrize(
    "text,value",
    [
        ("The two events are independent.\n\nFinal: \\( 3/4 \\)", "3/4"),
        ("It vanishes only at $x=5$, so we get $x \\neq 5$.", "x \\neq 5"),
        ("Adding the invoices, the total is 1,204.50€.", "1,204.50\\text{ euros}"),
        ("The product is:\n$$\\begin{pmatrix}2&1\\\\0&3\\end{pmatrix}$$", "\\begin{pmatrix}2&1\\\\0&3\\end{pmatrix}"),
        ("She buys 3 tickets at $\\$4$ each, so she spends $12.", "12\\text{ dollars}"),
        ("Each of the 6 crates holds 3 melons, which makes 18 melons.", "18\\text{ melons}"),
        ("Hence the ordered pairs are $(3,0)$ and $(-3,1)$.", "(3,0), (-3,1)"),
        (
            "Now apply it twice to obtain $u_5 = 34$ and $u_7 = 233$.",
            "233",
        ),  # two results with different labels: the last closes
    ],
)
def test_final_answer_reads_the_last_stated_value(text, value):
    assert extract_final_answer(text, "final_answer") == value
    assert extract_final_answer(text, "boxed") is None


@pytest.mark.parametrize(
    "text",
    [
        "Perhaps she spends $12.",
        "So she likely spends $12$.",
        "The greatest value of $g$ may be $12$.",
        "The minimum is $5$. This is achieved when $x = 12$.",
        "She spends at least $12$.",
        "She spends $12$ or $13$.",
        "Does she spend $12$?",
        "Wait, she spends $12$.",
        "She does not spend $12$.",
        "Let me compute $3 \\cdot 4 = 12$",  # cut off: no full stop, no colon, not on its own line
        "This contradicts the minimality of $12$.",
        "Hence there are no pairs of the form $(12, n)$.",
        "We list the terms $3, 6, 12, \\ldots$.",
    ],
)
def test_a_last_value_that_is_not_asserted_gives_no_answer(text):
    assert extract_final_answer(text, "final_answer") is None


@pytest.mark.parametrize(
    "text,value",
    [
        ("Tom has 6 + 12 = 18 stickers.\nA: 18", "18"),
        ("She keeps 16 / 2 = 8 of them. #### 8", "8"),
        ("The shop earns 25 * 50 = 1250 dollars.\n#### 1,250", "1,250"),
    ],
)
def test_dataset_answer_lines_give_their_number(text, value):
    assert extract_final_answer(text, "final_answer") == value


def test_a_bare_braced_gold_is_a_set_for_several_boxes():
    text = "So the roots are $\\boxed{3}$, $\\boxed{1}$ and $\\boxed{2}$."
    assert extract_final_answer(text, "boxed", "{1,2,3}") == "3, 1, 2"
    assert verdict("{1,2,3}", "3, 1, 2") is True and verdict("{1,2,3}", "3, 1, 4") is False


@pytest.mark.parametrize(
    "gold,right,wrongs",
    [
        ("(3,1),(4,1)", "m=3,n=1; m=4,n=1", ["m=3,n=1; m=4,n=2", "n=3,m=1; n=4,m=1"]),
        ("(2,5),(5,2)", "a=5, b=2 \\text{ or } a=2, b=5", ["a=5, b=2 \\text{ or } a=2, b=2"]),
        ("-5,2,7", "k=2,\\,-5,\\,7", ["k=2,\\,-5,\\,8", "k=2,\\,-5"]),
        ("g(t) = 5t - 1", "y = 5t - 1", ["y = 5t + 1", "t = 5t - 1"]),
    ],
)
def test_equation_and_labelled_forms_match_their_plain_form(gold, right, wrongs):
    assert verdict(gold, right) is True
    assert [w for w in wrongs if verdict(gold, w)] == []


def test_the_grading_page_lists_every_turn_marker():
    page = (Path(__file__).resolve().parents[2] / "docs" / "grading.md").read_text()
    section = page[page.index("## Turn markers") : page.index("## Answer forms")]
    markers = (*TURN_TOKENS, *TURN_LABELS, QUESTION_LABEL)
    missing = [m for m in markers if f"`{m.replace('|', chr(92) + '|')}`" not in section]
    assert missing == []


def _release_rows() -> tuple[tuple, list[tuple]]:
    """benchmarks/release_forms.py's RESPONSE_KINDS and ROWS: the benchmark's cases are the test's, written once."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "release_forms.py"
    spec = importlib.util.spec_from_file_location("release_forms", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RESPONSE_KINDS, module.ROWS


RESPONSE_KINDS, RELEASE_ROWS = _release_rows()


@pytest.mark.parametrize(
    "kind,gold,answer,correct,problem", RELEASE_ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(RELEASE_ROWS)]
)
def test_every_released_form_case_gets_its_verdict(kind, gold, answer, correct, problem):
    # As `lead-recipes grade --grade.extraction final_answer` with the problem: extraction, then the verdict.
    pred = extract_final_answer(answer, "final_answer", gold, problem) if kind in RESPONSE_KINDS else answer
    got = pred is not None and verdict(gold, pred, stated_precision(problem) or ("rel", DEFAULT_REL_TOL))
    assert got is correct, pred
