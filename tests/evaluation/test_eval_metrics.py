"""Evaluation metrics: unbiased pass@k vs brute force, Cons@k conventions (with the real grader's equivalence),
AES hand-computed cases, avg@n and the unweighted benchmark average."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation import metrics
from evaluation.metrics import Vote


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_unbiased_pass_at_k_equals_brute_force_enumeration(nck):
    n, c, k = nck
    assert metrics.pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_1_is_mean_accuracy():
    assert metrics.pass_at_k(32, 7, 1) == pytest.approx(7 / 32)


@pytest.mark.parametrize("n,c,k", [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        metrics.pass_at_k(n, c, k)


def V(ans, correct, truncated=False):
    return Vote(ans, truncated, correct)


def test_cons_equivalent_wrong_answers_form_one_class(grader):
    # gold 3: "1/2" and "0.5" are one wrong class of 2 that outvotes the single correct "3" (unclustered, the
    # three-way tie would go to the earliest sample, "3").
    votes = [V("3", True), V("1/2", False), V("0.5", False)]
    assert metrics.majority_vote(votes, grader.equivalent_many) is False


def test_cons_distinct_wrong_answers_do_not_merge(grader):
    votes = [V("3", True), V("1/2", False), V("0.6", False)]
    assert metrics.majority_vote(votes, grader.equivalent_many) is True


def test_cons_tie_goes_to_earliest_sample_class(grader):
    assert (
        metrics.majority_vote([V("4", False), V("3", True), V("3", True), V("4", False)], grader.equivalent_many)
        is False
    )
    assert (
        metrics.majority_vote([V("3", True), V("4", False), V("4", False), V("3", True)], grader.equivalent_many)
        is True
    )


def test_cons_unparsable_samples_do_not_vote(grader):
    votes = [V(None, False), V(None, False), V(None, False), V("3", True)]
    assert metrics.majority_vote(votes, grader.equivalent_many) is True


def test_cons_truncated_samples_do_not_vote(grader):
    votes = [V("7", False, truncated=True), V("7", False, truncated=True), V("3", True)]
    assert metrics.majority_vote(votes, grader.equivalent_many) is True


def test_cons_all_excluded_is_wrong(grader):
    votes = [V(None, False), V("3", True, truncated=True)]
    assert metrics.majority_vote(votes, grader.equivalent_many) is False


def test_cons_correct_votes_in_equivalent_forms_pool_through_gold(grader):
    # gold 1/2: "0.5" and "\\frac{1}{2}" are both correct, 2 votes beat two different wrong answers... and a pair
    votes = [V("0.25", False), V("0.5", True), V("\\frac{1}{2}", True), V("\\frac14", False), V("7", False)]
    # wrong classes: {0.25, \frac14} (size 2, first index 0) vs correct (size 2, first index 1): tie → earliest wins
    assert metrics.majority_vote(votes, grader.equivalent_many) is False
    assert metrics.majority_vote(votes[1:], grader.equivalent_many) is True


def test_aes_accuracy_gain_hand_computed():
    # ΔL = (1000-600)/1000 = 0.4, ΔA = (0.6-0.5)/0.5 = 0.2 → 0.4 + 3·0.2 = 1.0
    assert metrics.aes(0.6, 600, 0.5, 1000)["aes"] == pytest.approx(1.0)


def test_aes_accuracy_drop_weighs_gamma():
    # ΔL = 0.5, ΔA = -0.2 → 0.5 - 5·0.2 = -0.5
    out = metrics.aes(0.4, 500, 0.5, 1000)
    assert out["aes"] == pytest.approx(-0.5)
    assert out["delta_accuracy"] == pytest.approx(-0.2)


def test_aes_longer_and_equal_accuracy_is_negative():
    assert metrics.aes(0.5, 1200, 0.5, 1000)["aes"] == pytest.approx(-0.2)


def test_aes_zero_base_accuracy_is_null_with_reason():
    out = metrics.aes(0.3, 500, 0.0, 1000)
    assert out["aes"] is None and "base accuracy" in out["reason"]
    assert out["delta_length"] == pytest.approx(0.5)


def test_aes_percentages_and_fractions_agree():
    assert metrics.aes(60, 600, 50, 1000)["aes"] == pytest.approx(metrics.aes(0.6, 600, 0.5, 1000)["aes"])


def _summary(accs, lens):
    b = {f"b{i}": {"accuracy": a, "mean_length": l} for i, (a, l) in enumerate(zip(accs, lens))}
    return {"benchmarks": b, "average": metrics.average(b)}


def test_aes_report_uses_averaged_accuracy_and_length_not_mean_of_aes():
    model, base = _summary([0.2, 0.9], [100, 1000]), _summary([0.1, 0.9], [200, 1000])
    rep = metrics.aes_report(model, base)
    # averages: acc 0.55 vs 0.5, len 550 vs 600 → ΔL = 1/12, ΔA = 0.1 → 1/12 + 0.3
    assert rep["overall"]["aes"] == pytest.approx(1 / 12 + 0.3)
    per = [v["aes"] for v in rep["per_benchmark"].values()]
    assert per == [pytest.approx(0.5 + 3.0), pytest.approx(0.0)]
    assert not math.isclose(sum(per) / 2, rep["overall"]["aes"])


def test_benchmark_average_is_unweighted_over_benchmarks():
    avg = metrics.average(
        {"small": {"accuracy": 1.0, "mean_length": 10.0}, "big": {"accuracy": 0.0, "mean_length": 30.0}}
    )
    assert avg["accuracy"] == 0.5 and avg["mean_length"] == 20.0


def test_stderr_is_over_problem_means():
    mean, se = metrics.mean_and_stderr([1.0, 0.0, 0.5, 0.5])
    assert mean == 0.5
    assert se == pytest.approx(math.sqrt((0.25 + 0.25) / 3 / 4))


def _s(correct, tokens=10, extracted="1", truncated=False, status=None):
    return {
        "correct": correct,
        "num_tokens": tokens,
        "extracted": extracted,
        "truncated": truncated,
        "status": status or ("correct" if correct else "wrong"),
    }


def test_benchmark_metrics_lengths_truncation_and_no_answer(grader):
    problems = [[_s(True, 10), _s(False, 30, None, True, "no_answer")], [_s(True, 20), _s(True, 40)]]
    m = metrics.benchmark_metrics(problems, grader.equivalent_many)
    assert m["accuracy"] == 0.75
    assert m["mean_length"] == 25.0
    assert m["truncation_rate"] == 0.25 and m["no_answer_rate"] == 0.25
    assert m["pass_at_k"] == {"1": 0.75, "2": 1.0}
    assert m["cons_at_k"]["2"] == 1.0
    assert (m["n_problems"], m["n_samples"]) == (2, 2)


def test_benchmark_metrics_rejects_ragged_sample_counts(grader):
    with pytest.raises(ValueError, match="same number"):
        metrics.benchmark_metrics([[_s(True)], [_s(True), _s(False)]], grader.equivalent_many)


def test_the_scorer_applies_the_precision_each_problem_states(grader):
    from evaluation.scoring import Scorer

    golds = {("b", "stated"): "\\frac13", ("b", "none"): "\\frac13"}
    problems = {("b", "stated"): "What is 1/3 to the nearest hundredth?", ("b", "none"): "What is 1/3?"}
    scorer = Scorer(golds, grader, problems=problems)
    rows = [
        {"benchmark": "b", "id": i, "response": f"So \\boxed{{{a}}}."}
        for i, a in (("stated", "0.330"), ("none", "0.330"), ("stated", "0.34"))  # 0.330: three places claimed
    ]
    assert [r["correct"] for r in scorer.score_rows(rows)] == [True, False, False]


def test_the_scorer_ends_a_response_at_an_echo_of_its_problem(grader):
    # `lead-recipes eval` grades through Scorer: a base model that answers, then repeats the problem and answers
    # again, is graded on its first answer, as `lead-recipes grade` does.
    from evaluation.scoring import Scorer

    problem = "A tank holds 120 litres and drains 8 litres a minute. How long until it is empty?"
    scorer = Scorer({("b", "1"): "15"}, grader, problems={("b", "1"): problem})
    rows = [{"benchmark": "b", "id": "1", "response": f"So $\\boxed{{15}}$.\n{problem}\nSo $\\boxed{{16}}$."}]
    assert [(r["extracted"], r["correct"]) for r in scorer.score_rows(rows)] == [("15", True)]
