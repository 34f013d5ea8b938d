"""Several boxed answers (lead_recipes.grading.extraction.pairing, answers.extract_final_answer): a list gold reads all
boxes of the closing statement as one answer (order-free for a set, label by label for labelled values), a single-value
gold reads the last box, a gold written with several boxes is their combination, an intermediate box before the closing
statement is not part of it, and a box wins over a later unboxed statement under both policies."""

from __future__ import annotations

import pytest

from lead_recipes.grading.extraction.answers import extract_final_answer
from lead_recipes.grading.extraction.pairing import gold_text, is_list

PAIRS = "so the pairs are $\\boxed{(1, 3)}$ and $\\boxed{(4, 2)}$."


@pytest.mark.parametrize("policy", ["boxed", "final_answer"])
@pytest.mark.parametrize(
    "gold,response,correct",
    [
        ("(1, 3), (4, 2)", PAIRS, True),
        ("(4, 2), (1, 3)", PAIRS, True),  # a set of pairs: order-free
        (r"\{(1, 3), (4, 2)\}", PAIRS, True),
        ("(1, 3), (4, 5)", PAIRS, False),  # one pair wrong
        ("(1, 3), (4, 2), (0, 0)", PAIRS, False),  # one pair missing
        ("(1, 3)", PAIRS, False),  # extra pair for a one-pair gold: last box
        ("2, -3", "The roots are $x = \\boxed{2}$ or $x = \\boxed{-3}$.", True),
        ("2, -3", "The roots are $x = \\boxed{2}$ or $x = \\boxed{-4}$.", False),
        ("x=1, y=2", "Hence $\\boxed{y = 2}$ and $\\boxed{x = 1}$.", True),  # labelled: matched label by label
        ("x=1, y=2", "Hence $\\boxed{y = 1}$ and $\\boxed{x = 2}$.", False),
        (r"\pm 3", "So $a = \\boxed{3}$ or $a = \\boxed{-3}$.", True),
        (r"\pm 3", "So $a = \\boxed{3}$ or $a = \\boxed{-2}$.", False),
        ("1, 2", "Case 1 gives \\boxed{1}.\n\nCase 2 gives \\boxed{2}.", True),
    ],
)
def test_a_list_gold_reads_every_box_of_the_closing_statement(grader, policy, gold, response, correct):
    assert grader.grade(gold, "Work.\n\n" + response, extraction=policy).correct is correct


def test_a_single_value_gold_reads_the_last_box(grader):
    text = "First $a = \\boxed{3}$, and so the answer is $\\boxed{12}$."
    assert grader.grade("12", text).correct and not grader.grade("3", text).correct


def test_an_intermediate_box_before_the_closing_statement_is_not_part_of_the_list(grader):
    text = "We find $a = \\boxed{3}$. Then the roots are $\\boxed{1}$ and $\\boxed{2}$."
    assert extract_final_answer(text, "boxed", gold="1, 2") == "1, 2"
    assert grader.grade("1, 2", text).correct and not grader.grade("1, 2, 3", text).correct


def test_a_restated_list_is_read_once():
    text = "The solutions are $\\boxed{1}$ and $\\boxed{2}$.\n\n**Final Answer**\n$\\boxed{1}$, $\\boxed{2}$"
    assert extract_final_answer(text, "boxed", gold="1, 2") == "1, 2"


def test_a_gold_with_several_boxes_is_their_combination(grader):
    assert gold_text("$\\boxed{1}$ and $\\boxed{5}$") == "1, 5"
    assert grader.grade("$\\boxed{1}$ and $\\boxed{5}$", "\\boxed{5, 1}").correct
    assert not grader.grade("$\\boxed{1}$ and $\\boxed{5}$", "\\boxed{5}").correct
    assert not grader.grade("$\\boxed{1}$ and $\\boxed{5}$", "\\boxed{1, 6}").correct


def test_boxes_inside_think_are_not_read():
    text = "<think>maybe \\boxed{7}</think> The roots are \\boxed{1} and \\boxed{2}."
    assert extract_final_answer(text, "boxed", gold="1, 2, 7") == "1, 2"


@pytest.mark.parametrize("policy", ["boxed", "final_answer"])
def test_a_box_wins_over_a_later_different_statement_under_both_policies(policy):
    assert extract_final_answer("So \\boxed{5}.\n\nFinal Answer: the answer is 7.", policy) == "5"


@pytest.mark.parametrize(
    "gold,many",
    [
        ("1, 2", True),
        (r"\{1, 2\}", True),
        ("x=1, y=2", True),
        (r"\pm 2", True),
        (r"1 \text{ or } 2", True),
        ("(1, 2)", False),
        ("[1, 2)", False),
        ("12", False),
        (r"\frac{1}{2}", False),
        (r"f(x, y)", False),
        ("1,000", False),
        ("12,345.5", False),
        ("900,\\!000,\\!000", False),
        ("10{,}000", False),
    ],
)
def test_a_gold_is_a_list_only_when_it_holds_several_values(gold, many):
    assert is_list(gold) is many


def test_a_gold_with_a_thousands_separator_reads_the_last_box(grader):
    assert grader.grade("1,000", "So $n = \\boxed{5}$ and the total is $\\boxed{1000}$.").correct


# A box holding a value with words that change it is wrong, next to a box with a unit that is right; a
# gold written with a decimal comma is not the decimal.
@pytest.mark.parametrize(
    "gold,wrong,right",
    [
        ("5", "\\boxed{5\\text{ million}}", "\\boxed{5\\text{ cm}}"),
        ("3", "\\boxed{3 \\text{ or more}}", "\\boxed{3 \\text{ ways}}"),
        ("1,5", "\\boxed{1.5}", "\\boxed{1,5}"),
    ],
)
def test_a_box_with_value_changing_words_is_wrong_and_one_with_a_unit_is_right(grader, gold, wrong, right):
    assert not grader.grade(gold, "So " + wrong).correct and grader.grade(gold, "So " + right).correct


# No false positive: a gold list that repeats a value is a multiset (roots with multiplicity, two parts
# with equal answers); math-verify compares lists as sets, so the count and the multiplicity are checked here.
@pytest.mark.parametrize(
    "gold,response,correct",
    [
        ("1, 1, 2", "The roots are $\\boxed{1}$ and $\\boxed{2}$.", False),
        ("1, 1, 2", "The roots are $\\boxed{1}$, $\\boxed{1}$ and $\\boxed{2}$.", True),
        ("1, 1, 2", "The roots are $\\boxed{1, 2, 2}$.", False),
        ("1, 1, 2", "The roots are $\\boxed{2, 1, 1}$.", True),
        ("1, 1, 2", "The roots are $\\boxed{x = 2, x = 1, x = 1}$.", True),
        ("3, 3", "Both parts give $\\boxed{3}$.", False),
        ("3, 3", "Part (a) gives $\\boxed{3}$ and part (b) gives $\\boxed{3}$.", True),
        (r"\sqrt{2}, \sqrt{2}", "So $\\boxed{\\sqrt{2}}$.", False),
        ("900,\\!000,\\!000", "So $\\boxed{900000000}$.", True),  # one number: repeated groups are no multiset
    ],
)
def test_a_gold_that_repeats_a_value_keeps_its_multiplicity(grader, gold, response, correct):
    assert grader.grade(gold, "Work.\n\n" + response).correct is correct


def test_a_list_restated_under_a_final_answer_heading_is_read_once(grader):
    text = "The solutions are $\\boxed{2}$ and $\\boxed{4}$.\n\n**Final Answer**\n$\\boxed{2}$, $\\boxed{4}$"
    assert extract_final_answer(text, "boxed", gold="2, 4") == "2, 4"
    assert grader.grade("2, 4", text).correct and not grader.grade("2, 4, 4", text).correct


@pytest.mark.parametrize(
    "response,correct",
    [
        ("So $y = \\boxed{3}$ and $x = \\boxed{2}$.", True),
        ("So $x = \\boxed{2}$ and $y = \\boxed{3}$.", True),
        ("So $y = \\boxed{2}$ and $x = \\boxed{3}$.", False),
    ],
)
def test_labels_written_before_the_boxes_are_matched_label_by_label(grader, response, correct):
    assert grader.grade("x=2, y=3", "Work.\n\n" + response).correct is correct


def test_a_list_gold_in_one_text_box_reads_every_box(grader):
    assert is_list(r"\text{A, C}") and not is_list(r"\text{A}")
    assert grader.grade(r"\text{A, C}", "The correct options are $\\boxed{A}$ and $\\boxed{C}$.").correct
    assert not grader.grade(r"\text{A, C}", "The correct options are $\\boxed{A}$ and $\\boxed{D}$.").correct


# No false positive: a box its own clause rejects is no part of the list, wherever the rejecting
# word stands: before the box ("We reject $x = \boxed{-1}$"), or between it and the next ("is extraneous").
@pytest.mark.parametrize(
    "response",
    [
        "We reject $x=\\boxed{-1}$ and keep $x=\\boxed{4}$.",
        "Here $x=\\boxed{-1}$ is extraneous; the solution is $x=\\boxed{4}$.",
        "The value $x = \\boxed{-1}$ is wrong; the answer is $x = \\boxed{4}$.",
        "Discarding $x=\\boxed{-1}$, we are left with $x=\\boxed{4}$.",
    ],
)
def test_a_rejected_box_is_not_joined_to_the_list(grader, response):
    assert extract_final_answer("Work.\n\n" + response, "boxed", gold="-1, 4") == "4"
    assert not grader.grade("-1, 4", "Work.\n\n" + response).correct


# A tuple gold answered with one labelled box per component (`x = \boxed{1}`, `y = \boxed{2}`)
# is the labelled tuple, compared in the labels' order; unlabelled boxes and another count stay the last box.
@pytest.mark.parametrize(
    "gold,response,correct",
    [
        ("(2, 3)", "Therefore $x = \\boxed{2}$ and $y = \\boxed{3}$.", True),
        ("(2, 3)", "Therefore $y = \\boxed{3}$ and $x = \\boxed{2}$.", True),
        ("(2, 3)", "Therefore $x = \\boxed{3}$ and $y = \\boxed{2}$.", False),
        ("(1, 2, 3)", "So $x=\\boxed{1}$, $y=\\boxed{2}$, $z=\\boxed{3}$.", True),
        ("(1, 2, 3)", "So $x=\\boxed{1}$, $y=\\boxed{2}$, $z=\\boxed{4}$.", False),
        ("(1, 2, 3)", "So $y=\\boxed{2}$, $z=\\boxed{3}$.", False),
        ("(2, 3)", "The values are $\\boxed{2}$ and $\\boxed{3}$.", False),
    ],
)
def test_a_tuple_gold_reads_one_labelled_box_per_component(grader, gold, response, correct):
    for policy in ("boxed", "final_answer"):
        assert grader.grade(gold, "Work.\n\n" + response, extraction=policy).correct is correct


# The rejecting word binds to its own clause: a box after "(it fails the check), the valid values are" is kept.
@pytest.mark.parametrize(
    "response,gold",
    [
        ("Discarding $n=\\boxed{5}$ (it fails the check), the valid values are $\\boxed{3}$ and $\\boxed{7}$.", "3, 7"),
        ("The root $x=\\boxed{-3}$ is invalid since $x>0$; so $x=\\boxed{2}$ or $x=\\boxed{6}$.", "2, 6"),
    ],
)
def test_a_rejection_of_an_earlier_box_does_not_cut_off_the_next(response, gold):
    assert extract_final_answer("Work.\n\n" + response, "boxed", gold=gold) == gold
