"""Prose final answers under `final_answer` (lead_recipes.grading.extraction.statement, assertion): the value a final
statement asserts is the right-hand side of "is"/"=" after the named quantity, or the set that "is the solution"; a
harmless "could"/"not" or a formula in the subject does not refuse it, while a hedge, a negated or modal verb, a
condition, an alternative or a retraction still does."""

from __future__ import annotations

import pytest

from lead_recipes.grading.extraction.statement import extract_statement

W = "Work.\n\n"


@pytest.mark.parametrize(
    "text,value",
    [
        ("Final Answer: The largest $n$ is 34.", "34"),
        ("The volume of $ABCD$ is 120.", "120"),
        ("Final Answer: The maximum value that $f(x)$ could take is $5$.", "5"),
        ("**Final Answer:** The minimum value of $f(x)$ is $-3$.", "-3"),
        ("Thus the number of integers that are not divisible by $3$ is $67$.", "67"),
        ("Answer: the remainder when $N$ is divided by $13$ is $11$.", "11"),
        ("The final answer is that the limit equals $1$.", "1"),
        ("Therefore $x \\ge 5$ is the solution.", "x \\ge 5"),
        ("So $34$ is the largest such $n$.", "34"),
        ("Therefore, $n = 7$ is the only solution.", "7"),
        ("Final answer: $x = 3$ and $y = -2$.", "x = 3, y = -2"),
    ],
)
def test_the_asserted_value_is_extracted(text, value):
    assert extract_statement(W + text) == value


@pytest.mark.parametrize(
    "text",
    [
        "Final Answer: The largest $n$ could be 34.",
        "The largest $n$ is not 34.",
        "The answer might be $34$.",
        "If $n$ is even, the largest $n$ is $34$.",
        "Perhaps the answer is $34$.",
        "If $a = 1$, then the answer is $34$.",
        "Therefore $x \\ge 34$ is not the solution.",
        "The largest $n$ is $34$, unless $a < 0$, in which case it is $35$.",
        "So $n = 34$... no, that fails the second equation.",
        "The value of $k$ isn't $34$.",
        "Thus $n$ is not equal to $34$.",
        "The answer is $34$ or $35$.",
        "Therefore $n = 34$ is a candidate, but we still have to check it.",
    ],
)
def test_a_hedged_negated_conditional_or_retracted_statement_gives_no_answer(text):
    assert extract_statement(W + text) is None


@pytest.mark.parametrize("value", ["34", "35", "-2", "\\frac{1}{2}"])
def test_the_named_quantity_is_never_taken_for_the_value(value):
    assert extract_statement(W + f"Final Answer: The largest $n$ is ${value}$.") == value
    assert extract_statement(W + f"The volume of $ABCD$ is {value}.") == value


# No false positive: each refused statement next to the right statement it nearly is.
@pytest.mark.parametrize(
    "wrong,right",
    [
        ("I don't think the answer is $5$.", "I think the answer is $5$."),
        ("I do not believe the answer is $5$.", "I believe the answer is $5$."),
        ("We cannot conclude that the answer is $5$.", "We conclude that the answer is $5$."),
        ("It is false that the answer is $5$.", "It is clear that the answer is $5$."),
        ("It is not true that the answer is $5$.", "It is true that the answer is $5$."),
        ("Nobody would say the answer is $5$.", "So the answer is $5$."),
    ],
)
def test_a_negation_or_doubt_anywhere_before_the_answer_marker_refuses_it(wrong, right):
    assert extract_statement(W + wrong) is None and extract_statement(W + right) == "5"


@pytest.mark.parametrize(
    "wrong,right",
    [
        ("The answer is less than $5$.", "The answer is $5$."),
        ("The answer is greater than $5$.", "The answer is exactly $5$."),
        ("The answer is at most $5$.", "The answer is $5$."),
        ("The answer is $5$ or less.", "The answer is $5$."),
        ("The answer is 5 or more.", "The answer is 5."),
        ("Thus $n$ is at most $5$.", "Thus $n$ is $5$."),
    ],
)
def test_a_bound_is_not_the_value_but_approximately_still_is(wrong, right):
    assert extract_statement(W + wrong) is None and extract_statement(W + right) == "5"
    assert extract_statement(W + "The answer is approximately $5$.") == "5"


@pytest.mark.parametrize(
    "wrong,right",
    [
        ("Therefore $x=5$ is the wrong answer.", "Therefore $x=5$ is the correct answer."),
        (
            "Therefore, $x = 5$ is the extraneous root, and there is no solution.",
            "Therefore, $x = 5$ is the only solution.",
        ),
        ("Therefore $x = 5$ is the solution only if $a = 1$.", "Therefore $x = 5$ is the solution."),
        ("Therefore $x = 5$ is the solution we must reject.", "Therefore $x = 5$ is the solution we want."),
        ("Therefore $5$ is the only value that does not work.", "Therefore $5$ is the only value that works."),
        ("The answer is $5$ (assuming $a>0$).", "The answer is $5$ (as computed above)."),
        ("Therefore $5$ is the range we must exclude.", "Therefore $5$ is the required value."),
    ],
)
def test_a_value_first_sentence_names_an_answer_and_is_not_denied_after_it(wrong, right):
    assert extract_statement(W + wrong) is None and extract_statement(W + right) == "5"


# No false negative: a negation binds to its own clause. One before the answer marker's clause (a premise,
# an earlier remark) does not refuse the asserted value; one in the marker's clause, or a condition or doubt
# anywhere before it, still does.
@pytest.mark.parametrize(
    "text,value",
    [
        ("Since no other value works, the answer is 5.", "5"),
        ("Since $x$ cannot be negative, the answer is $x = 4$.", "4"),
        ("No other integer satisfies both conditions, so the answer is $12$.", "12"),
        ("We do not need to check larger values, so the answer is $7$.", "7"),
        ("No, the answer is $10$.", "10"),
        ("Although $x$ is not an integer, $y$ is, and the answer is $10$.", "10"),
        ("Because the discriminant is not zero, the number of real roots is $2$.", "2"),
    ],
)
def test_a_negation_in_an_earlier_clause_does_not_refuse_the_asserted_value(text, value):
    assert extract_statement(W + text) == value


@pytest.mark.parametrize(
    "text",
    [
        "Since no other value works, the answer is not 5.",
        "No other integer satisfies both conditions, so we cannot say the answer is $12$.",
        "It is not the case that the answer is $7$.",
        "It is not true, however, that the answer is $7$.",
        "I doubt, given the constraints, that the answer is $7$.",
        "If $a > 0$, the answer is $7$.",
        "Since $a > 0$, perhaps the answer is $7$.",
        "Unless $a = 0$, the answer is $10$.",
        "Because the discriminant is zero, the number of real roots is not $2$.",
    ],
)
def test_a_negation_in_the_asserting_clause_or_a_condition_anywhere_still_refuses(text):
    assert extract_statement(W + text) is None


# What follows a value decides whether it was asserted alone.
@pytest.mark.parametrize(
    "text,value",
    [
        ("So the probability is $\\frac{5}{36}$, or about $0.139$.", "\\frac{5}{36}"),
        ("The answer is $\\frac{5}{36}$ (approximately $0.139$).", "\\frac{5}{36}"),
        ("The answer is $P = \\frac{5}{36} \\approx 0.139$.", "\\frac{5}{36}"),
        ("The answer is $5$, and the remainder is $2$.", "5"),
        ("The answer is $5$ and $6$.", "5, 6"),
        ("So the answer is 34, not 35.", "34"),
        ("Therefore $(1, 2)$ is the only pair that works.", "(1, 2)"),
        ("The minimum value is $10$, attained when $x = 2$.", "10"),
    ],
)
def test_a_restatement_a_new_clause_or_a_contrast_after_the_value_keeps_it(text, value):
    assert extract_statement(W + text) == value


@pytest.mark.parametrize(
    "text",
    [
        "So the probability is $\\frac{5}{36}$ or $\\frac{1}{6}$.",
        "The answer is $5$ or $6$.",
        "The answer is $5$ and also $6$, depending on the case.",
        "Therefore $(1, 2)$ is the only pair that fails.",
        "Therefore $x = 2$ is the first root.",
        "Therefore $x = 2$ is the only candidate.",
        "The answer is $10$ only when $a$ is even.",
    ],
)
def test_an_alternative_a_denial_or_a_condition_after_the_value_still_refuses(text):
    assert extract_statement(W + text) is None


# No false negative: each closing statement, as models write it, gives the value it asserts, not another part.
@pytest.mark.parametrize(
    "text,value",
    [
        ("The answer is: 42", "42"),  # MetaMath's closing line: a label, needs no period
        ("The number of triangles is therefore 20.", "20"),
        ("Wait, the answer is actually 21.", "21"),
        ("The answer, therefore, is 20.", "20"),
        ("Thus, the probability is $\\frac{1}{4}$, or $25\\%$.", "\\frac{1}{4}"),
        ("Thus, the probability is $\\frac{1}{4}$ (or $0.25$).", "\\frac{1}{4}"),
        ("The probability is $\\frac{3}{8}$, so $m+n = 11$.", "11"),
        ("The answer is $\\frac{3}{8}$, hence the requested sum is $11$.", "11"),
        ("The answer is $5$, so we are done.", "5"),
        ("The answer should be $7$.", "7"),
        ("The correct option is (C).", "(C)"),
        ("16 - 3 - 4 = 9 eggs, and 9 * 2 = 18.\n#### 18", "18"),
        ("Therefore, Janet makes $\\$18$ every day at the farmers' market.", "\\$18"),
        ("Therefore, Tom has 7 apples left.", "7"),
        ("In total, Maria spent $\\$100$.", "\\$100"),
    ],
)
def test_a_closing_statement_gives_the_value_it_asserts(text, value):
    assert extract_statement(W + text) == value


# No false positive: none of these asserts a value, so a grader takes none.
@pytest.mark.parametrize(
    "text",
    [
        "So $n = 34$ is the largest, and $n = 35$ fails.",
        "So the answer is $\\frac{1}{2}$. But we must double the count since order matters, giving $1$.",
        "So the answer is $\\frac{1}{2}$.\n\nHmm, but order matters, so it should be doubled.",
        "So the answer is $\\frac{1}{2}$. Wait, order matters.",
        "Thus, the probability is $\\frac{1}{4}$, or $\\frac{1}{3}$ if repeats are allowed.",
        "Thus, the probability is $\\frac{1}{4}$, or $30\\%$.",
        "The answer is $\\frac{3}{8}$, so $m+n$ is either $11$ or $12$.",
        "Therefore, Tom has 7 apples and 3 pears left.",
        "Therefore, Tom might have 7 apples left.",
        "Therefore, Tom has at least 7 apples left.",
        "Therefore, Tom likely has 7 apples left.",
        "Therefore, 7 apples are likely left.",
        "#### Step 3: count the cases",
    ],
)
def test_a_statement_that_asserts_no_single_value_gives_no_answer(text):
    assert extract_statement(W + text) is None


# On OlympiadBench reference solutions: a passive "is" asserts no value, and only the sentence right
# after the answer's can revise it (a later check that opens with "But" is no revision).
def test_a_passive_is_asserts_nothing_and_only_the_next_sentence_revises():
    text = "The answer is therefore the remainder when $576^{603}$ is divided by 1000 ."
    assert extract_statement(W + text) is None
    later = "The answer is $7$. For completeness, we check the other case. But it has no real solutions."
    assert extract_statement(W + later) == "7"


# "not X but Y" and "not X; it is Y" assert Y; "not X" alone, or "not X but maybe Y", none.
@pytest.mark.parametrize(
    "text,value",
    [
        ("Therefore, the answer is not 6 but 7.", "7"),
        ("The answer is not $5$; it is $6$.", "6"),
        ("So the answer is not $5$, but rather $6$.", "6"),
        ("The answer is not $5$.", None),
        ("The answer is not $5$ but maybe $6$.", None),
        ("The answer is not $5$ but $6$ or $7$.", None),
    ],
)
def test_a_corrected_negation_asserts_the_correction(text, value):
    assert extract_statement(W + text) == value


@pytest.mark.parametrize(
    "text",
    [
        "The required value is clearly $10$.",
        "The area of the square is then $10$ square units.",
        "Thus the number of real solutions is therefore $10$.",
    ],
)
def test_an_adverb_between_the_verb_and_a_math_value_is_skipped(text):
    assert extract_statement(W + text) in ("10", "10\\text{ square units}")
