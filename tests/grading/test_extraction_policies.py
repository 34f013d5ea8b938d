"""The two extraction policies: `boxed` (the last box only) and `final_answer` (the box, else the final-answer
statement of the closing part); the statement finder never reads `<think>` or the middle of the reasoning; the
policy is chosen per grader, per call, by flag (grade, serve) and by env (reward function), and is recorded."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lead_recipes.grading import cli as grade_cli
from lead_recipes.grading.extraction.answers import EXTRACTION_POLICIES, extract_final_answer
from lead_recipes.grading.extraction.statement import extract_statement
from lead_recipes.grading.pool import grader as grading
from lead_recipes.grading.pool.grader import Grader


# ------------------------------------------------------------------------------------------------ the policies
def test_the_policies_are_named_boxed_and_final_answer():
    assert EXTRACTION_POLICIES == ("boxed", "final_answer")


def test_boxed_policy_ignores_an_unboxed_answer_statement():
    assert extract_final_answer("So the answer is 7.", "boxed") is None


def test_final_answer_policy_prefers_the_box_over_a_later_statement():
    assert extract_final_answer(r"We get \boxed{5}. The answer is 7.", "final_answer") == "5"


def test_an_unknown_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="boxed, final_answer"):
        extract_final_answer(r"\boxed{1}", "lenient")
    with pytest.raises(ValueError, match="final_answer"):
        Grader(extraction="Boxed")


@pytest.mark.parametrize(
    "text,value",
    [
        ("Work.\n\nTherefore the rope is 20 cm.", r"20\text{ cm}"),
        ("Work.\n\nTherefore, $k=-1$ or $k=-9$.", "-1, -9"),
        ("Work.\n\nThus, $a=2, h=-1$, and $k=-18$.", "a=2, h=-1, k=-18"),  # labels kept: matched label by label
        ("Work.\n\nThus $9<2w<10$, and $\\lceil 2w\\rceil=10$.", "10"),
        ("Work:\n$$\n\\begin{aligned}\nS & =570+20 \\\\\n& =590\n\\end{aligned}\n$$", "590"),
        ("Work.\n\n**Answer:** $7.00", r"\$7.00"),
        ("Work.\n\nThe final answer is $\\frac{3}{4}$. I hope it is correct.", r"\frac{3}{4}"),
        ("Work.\n\n## Final Answer\n$$x^2+1$$", "x^2+1"),
        ("Work.\n\nThus, $a + b = 3 + 4 = 7$.", "7"),
        ("Work.\n\nAnswer: No", "No"),
        ("Work.\n\nHence the minimum value is $-2$.", "-2"),
        ("Work:\n\\[ x = \\frac{1}{2} \\]", r"\frac{1}{2}"),
        ("Work.\n\nTherefore, $AE + AP = PD$. $\\blacksquare$", "AE + AP = PD"),
    ],
)
def test_statement_forms_give_the_stated_value(text, value):
    assert extract_statement(text) == value


def test_a_concluding_formula_that_the_text_runs_out_on_is_not_an_answer():
    # A generation cut at the token limit right after a closed formula: no sentence end, so still reasoning.
    assert extract_statement("Work.\n\nSo $f(2m)f(0)=f(m+7)f(m-7)$") is None
    assert extract_statement("Work.\n\nSo $x = 12$.") == "12"


def test_prose_after_an_answer_marker_is_not_an_answer():
    assert extract_statement("To see that this answer is reasonable, consider that $x \\approx 1.2$.") is None


def test_text_inside_think_is_never_an_answer():
    assert extract_final_answer("<think>The answer is 5.</think>", "final_answer") is None
    assert extract_final_answer("<think>Hmm. The answer is 5. Let me check", "final_answer") is None


def test_the_statement_after_think_is_read():
    assert extract_final_answer("<think>The answer is 5.</think>\nThe answer is 6.", "final_answer") == "6"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(-(10**6), 10**6), filler=st.integers(2, 8))
def test_a_number_from_the_middle_of_the_reasoning_is_never_picked(n, filler):
    # A statement of the answer followed by more work that states none: the closing part has no answer.
    text = (
        f"Therefore $x = {n}$.\n\n"
        + "We now check the other case in detail.\n\n" * filler
        + "Then we would need to look at"
    )
    assert extract_final_answer(text, "final_answer") is None


@settings(max_examples=60, deadline=None)
@given(n=st.integers(-(10**6), 10**6))
def test_a_response_cut_off_mid_sentence_has_no_statement(n):
    assert extract_statement(f"Compute step by step.\n\nThus we have $y = {n} + z$ and so the value of") is None


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(-(10**9), 10**9),
    marker=st.sampled_from(
        [
            "The answer is {v}.",
            "Answer: {v}",
            "**Final Answer:** ${v}$",
            "Therefore, $x = {v}$.",
            "So the final answer is ${v}$.",
        ]
    ),
)
def test_the_stated_integer_is_extracted_exactly(n, marker):
    assert extract_statement("Some reasoning with 17 and 4.\n\n" + marker.format(v=n)) == str(n)


# ------------------------------------------------------------------------------------------------ grader switches
def test_grader_policy_decides_unboxed_responses(grader):
    assert grader.grade("7", "Work.\n\nThe answer is 7.").status == "no_answer"
    assert grader.grade("7", "Work.\n\nThe answer is 7.", extraction="final_answer").status == "correct"


def test_a_grader_built_for_final_answer_grades_statements():
    with Grader(timeout_s=2.0, workers=1, extraction="final_answer") as g:
        assert g.extraction == "final_answer"
        assert g.grade("7", "Work.\n\nThe answer is 7.").status == "correct"  # integer fast path: no pool needed


def test_reward_env_selects_the_shared_graders_policy(monkeypatch):
    monkeypatch.setattr(grading, "_SHARED", None)
    monkeypatch.setenv("LEAD_RECIPES_EXTRACTION", "final_answer")
    g = grading.get_grader()  # lazy pool: nothing starts here
    try:
        assert g.extraction == "final_answer"
    finally:
        g.close()


def test_reward_env_defaults_to_boxed_and_rejects_unknown_names(monkeypatch):
    monkeypatch.setattr(grading, "_SHARED", None)
    monkeypatch.delenv("LEAD_RECIPES_EXTRACTION", raising=False)
    g = grading.get_grader()  # lazy pool: nothing starts here
    try:
        assert g.extraction == "boxed"
    finally:
        g.close()
    monkeypatch.setenv("LEAD_RECIPES_EXTRACTION", "sloppy")
    with pytest.raises(ValueError, match="LEAD_RECIPES_EXTRACTION"):
        grading.get_grader()


def test_reward_function_with_an_unknown_env_policy_gives_status_error(monkeypatch):
    from lead_recipes.reward.reward_func import reward_func

    monkeypatch.setattr(grading, "_SHARED", None)
    monkeypatch.setenv("LEAD_RECIPES_EXTRACTION", "sloppy")
    out = reward_func(["\\boxed{1}"], [""], ["1"])
    assert out["extra_logs"]["status_error"] == 1.0


def test_grade_cli_defaults_to_final_answer_and_records_it(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        json.dumps({"answer": "7", "response": "Work.\n\nThe answer is 7."})
        + "\n"
        + json.dumps({"answer": "7", "given_answer": "7"})
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    assert (
        grade_cli.main(
            ["--input", str(inp), "--output", str(out), "--no-grade.progress_enable", "--grade.workers", "1"]
        )
        == 0
    )
    rows = [json.loads(line) for line in out.open()]
    assert [(r["status"], r["extraction"]) for r in rows] == [("correct", "final_answer"), ("correct", None)]
    assert "extraction final_answer" in capsys.readouterr().out


def test_grade_cli_boxed_flag_keeps_todays_rule(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"answer": "7", "response": "Work.\n\nThe answer is 7."}) + "\n")
    out = tmp_path / "out.jsonl"
    assert (
        grade_cli.main(
            [
                "--input",
                str(inp),
                "--output",
                str(out),
                "--no-grade.progress_enable",
                "--grade.workers",
                "1",
                "--grade.extraction",
                "boxed",
            ]
        )
        == 0
    )
    row = json.loads(out.read_text())
    assert (row["status"], row["extraction"]) == ("no_answer", "boxed")
    assert "extraction boxed" in capsys.readouterr().out


_ATOMS = list("$\\{}()=.,:!?*#\n 0123456789xTtheanswrois") + [
    "Therefore",
    "Answer:",
    "The final answer is",
    "\\[",
    "\\]",
    "$$",
    "<think>",
    "</think>",
    "\\begin{aligned}",
    "\\end{aligned}",
    "&",
    "\\\\",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), max_size=80).map("".join))
def test_arbitrary_text_never_raises(text):
    out = extract_final_answer(text, "final_answer")
    assert out is None or (isinstance(out, str) and out.strip())


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 10**6),
    d=st.integers(-9, 9),
    template=st.sampled_from(
        [
            "Work.\n\nTherefore the rope is {v} cm.",
            "Work.\n\n**Answer:** ${v}$",
            "Work.\n\nThe final answer is $x = {v}$.",
            "Work.\n\nThus, $a + b = 3 + 4 = {v}$.",
            "Work:\n\\[ y = {v} \\]",
        ]
    ),
)
def test_a_stated_value_is_graded_by_its_value(grader, n, d, template):
    text = template.format(v=n + d)
    assert grader.grade(str(n), text, extraction="final_answer").correct == (d == 0)


# ------------------------------------------------------------------------------------------------ refused statements
_NOT_AN_ANSWER_FOR_5 = [
    "The answer is either $5$ or $6$.",
    "The answer is probably $5$, but it could be $6$.",
    "The answer is maybe $5$.",
    "The answer is NOT $5$.",
    "Answer: not $5$",
    "The answer is neither $5$ nor $6$.",
    "Answer: $5$ or $6$",
    "The answer is $5$ and $6$.",
    "The answer is $5$... no wait, it's $6$.",
    "The answer is $5$ if $a>0$, otherwise $6$.",
    "Thus the answer cannot be $5$.",
    "The answer isn't 5.",
]


@pytest.mark.parametrize("statement", _NOT_AN_ANSWER_FOR_5)
def test_a_negated_hedged_or_alternative_statement_never_states_5(statement):
    assert extract_statement("Work.\n\n" + statement) not in {"5", "5\\text{ }"}


@pytest.mark.parametrize("statement", ["The answer is $5$.", "Answer: 5", "Therefore $x = 5$."])
def test_a_plain_statement_of_5_still_states_5(statement):
    assert extract_statement("Work.\n\n" + statement) == "5"


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(-(10**6), 10**6),
    word=st.sampled_from(
        [
            "not",
            "cannot be",
            "neither",
            "either",
            "maybe",
            "perhaps",
            "probably",
            "possibly",
            "might be",
            "could be",
            "if",
        ]
    ),
    math=st.booleans(),
    marker=st.sampled_from(["The answer is {w} {v}.", "Answer: {w} {v}", "So the answer is {w} {v}."]),
)
def test_any_hedge_or_negation_before_the_value_gives_no_answer(n, word, math, marker):
    v = f"${n}$" if math else str(n)
    assert extract_statement("Work.\n\n" + marker.format(w=word, v=v)) is None


@settings(max_examples=60, deadline=None)
@given(
    a=st.integers(-999, 999),
    b=st.integers(-999, 999),
    joiner=st.sampled_from(["or", "nor", "otherwise", "but it could be", "... no wait, it's"]),
)
def test_a_value_followed_by_an_alternative_value_gives_no_answer(a, b, joiner):
    assert extract_statement(f"Work.\n\nThe answer is ${a}$ {joiner} ${b}$.") is None


def test_a_question_is_not_a_conclusion():
    assert extract_statement("Work.\n\nSo we need $x = 5$? Let's verify: no, that fails.") is None
    assert extract_statement("Work.\n\nThe answer is $5$?") is None


def test_an_answer_sentence_the_text_runs_out_on_is_not_an_answer():
    assert extract_statement("Work.\n\nAdding everything up, the answer is 1") is None
    assert extract_statement("Work.\n\nAdding everything up, the answer is 1.") == "1"
