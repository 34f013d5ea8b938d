"""Grading of generations for evaluation and the token-budget sweep, through the grader API only: each final answer
is extracted once here, and only distinct (gold, answer) pairs go to the grader's pool, cached across batches.
It does not generate or write files. See docs/evaluation.md#grading.
"""

from __future__ import annotations

from lead_recipes.grading.options import REPORT_EXTRACTION


class Scorer:
    """Adds "extracted", "status", "correct" and "grade_latency_s" to result rows. `grader` defaults to the
    process-wide `get_grader()`; `golds` maps (benchmark, id) → gold answer; `problems` (benchmark, id) → problem
    text, whose stated precision ("to the nearest tenth") the grader applies; `extraction` is the answer-extraction
    policy: `final_answer` (lead_recipes.grading.options.REPORT_EXTRACTION, the default here as in `lead-recipes
    grade`) takes an unboxed final-answer statement when there is no box; `boxed` only the box."""

    def __init__(
        self,
        golds: dict[tuple[str, str], str],
        grader=None,
        extraction: str = REPORT_EXTRACTION,
        problems: dict[tuple[str, str], str] | None = None,
    ):
        from lead_recipes.grading.extraction.answers import check_extraction
        from lead_recipes.grading.pool.grader import get_grader

        self.golds, self.extraction, self.problems = golds, check_extraction(extraction), problems or {}
        self.grader = grader if grader is not None else get_grader()
        self.cache: dict[tuple[str, str, str | None], tuple] = {}

    def verdicts(self, items: list[tuple[str, str | None, str | None]]) -> list[tuple[bool, str, float, str | None]]:
        """(gold, raw extracted answer, problem or None) → (correct, status, latency_s, normalized answer as the
        grader saw it), grading each distinct item once."""
        todo = sorted({p for p in items if p[1] is not None and p not in self.cache}, key=lambda p: (p[0], p[1]))
        if todo:
            grades = self.grader.grade_many([(gold, None, ans, problem) for gold, ans, problem in todo])
            if len(grades) != len(todo):
                raise RuntimeError(f"grader returned {len(grades)} grades for {len(todo)} items")
            for pair, g in zip(todo, grades):
                self.cache[pair] = (bool(g.correct), str(g.status), float(g.latency_s), g.extracted)
        return [self.cache[p] if p[1] is not None else (False, "no_answer", 0.0, None) for p in items]

    def extract(self, text: str, key: tuple[str, str]) -> str | None:
        """The final answer of `text`, the response to problem `key`, under the policy, given the problem's gold (a
        list gold joins several boxes into one answer) and text (an echo of the problem after an answer ends the
        response), as the grader does for a full response
        (`lead_recipes.grading.extraction.answers.extract_final_answer`)."""
        from lead_recipes.grading.extraction.answers import extract_final_answer

        return extract_final_answer(text, self.extraction, self.golds[key], self.problems.get(key))

    def score_rows(self, rows: list[dict]) -> list[dict]:
        keys = [(r["benchmark"], r["id"]) for r in rows]
        items = [(self.golds[k], self.extract(r["response"], k), self.problems.get(k)) for k, r in zip(keys, rows)]
        for r, (correct, status, latency, extracted) in zip(rows, self.verdicts(items)):
            r["extracted"], r["correct"], r["status"], r["grade_latency_s"] = extracted, correct, status, latency
        return rows

    def equivalent_many(self, pairs):
        return self.grader.equivalent_many(pairs)


# What each budget-sweep mode does with a response longer than the budget (report.md says it under the table).
BUDGET_MODES = {
    "prefix": "a response longer than the budget B is cut to its first B tokens with the tokenizer and graded again, "
    "which is what a B-token cap would have produced. A response within the budget is unchanged",
    "cap": "no tokenizer was given, so a response longer than the budget B counts as wrong (a B-token cap would have "
    "cut it off before its final answer); pass --eval.tokenizer to grade its first B tokens instead. A response "
    "within the budget is unchanged",
    "l1_prompt": "each budget B is its own generation whose prompt asks for B tokens (L1, arXiv 2503.04697); nothing "
    "is cut, and the last column is the mean |length - B|",
}


def left_out_text(sweep: dict) -> str | None:
    """The sentence that says which budgets the sweep left out and why (report.md and the command's stderr)."""
    out = sweep.get("left_out")
    if not out:
        return None
    why = (
        "the cap: the generations cannot say what a longer cap would give"
        if out["limit"] == "cap"
        else "the longest sample: the cap is unknown, so it may have cut samples there"
    )
    return f"Budgets {', '.join(map(str, out['budgets']))} left out of the sweep: above {out['above']}, {why}"


def truncate_to_budget(tokenizer, text: str, budget: int) -> str:
    """The first `budget` tokens of a response, decoded: what the same sample would have been with
    max_new_tokens = budget (sampling is autoregressive, so a shorter cap yields the prefix of the longer run)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    return tokenizer.decode(ids[:budget], skip_special_tokens=False) if len(ids) > budget else text


def budget_sweep(
    samples: dict[str, list[list[dict]]],
    scorer: Scorer,
    budgets: list[int],
    max_new_tokens: int | None,
    tokenizer=None,
) -> dict:
    """Accuracy and mean length at each token budget B (GRPO-LEAD Fig. 3), per benchmark and averaged.

    A sample with num_tokens ≤ B is unchanged. A longer one is cut at B tokens and re-graded ("prefix" mode, needs
    a tokenizer); without a tokenizer it is counted wrong ("cap" mode: it would have been truncated before
    its final answer, which is where R1-style models put it). Its length counts as B. Budgets above the run's
    max_new_tokens are left out (the data cannot say what a longer cap would give); with an unknown cap (None, a
    replay), budgets above the longest sample, which the cap was at least. Those are listed under "left_out"."""
    mode = "prefix" if tokenizer is not None else "cap"
    out = {"mode": mode, "budgets": {}}
    limit, known = max_new_tokens, max_new_tokens is not None
    if not known:
        limit = max(s["num_tokens"] for problems in samples.values() for p in problems for s in p)
    left_out = sorted({int(b) for b in budgets if int(b) > limit})
    if left_out:
        out["left_out"] = {"budgets": left_out, "above": limit, "limit": "cap" if known else "longest sample"}
    for budget in sorted({int(b) for b in budgets if 0 < int(b) <= limit}):
        per_bench = {}
        for bench, problems in samples.items():
            flat = [s for p in problems for s in p]
            over = [s for s in flat if s["num_tokens"] > budget]
            cut = {}
            if over and mode == "prefix":
                texts = [truncate_to_budget(tokenizer, s["response"], budget) for s in over]
                keys = [(s["benchmark"], s["id"]) for s in over]
                items = [(scorer.golds[k], scorer.extract(t, k), scorer.problems.get(k)) for k, t in zip(keys, texts)]
                cut = {id(s): v[0] for s, v in zip(over, scorer.verdicts(items))}
            correct = sum(bool(s["correct"]) if s["num_tokens"] <= budget else cut.get(id(s), False) for s in flat)
            per_bench[bench] = {
                "accuracy": correct / len(flat),
                "mean_length": sum(min(s["num_tokens"], budget) for s in flat) / len(flat),
                "truncation_rate": sum(
                    s["num_tokens"] > budget or (s["num_tokens"] == budget and bool(s["truncated"])) for s in flat
                )
                / len(flat),
            }
        n = len(per_bench)
        out["budgets"][str(budget)] = {
            "benchmarks": per_bench,
            "average": {
                "accuracy": sum(v["accuracy"] for v in per_bench.values()) / n,
                "mean_length": sum(v["mean_length"] for v in per_bench.values()) / n,
            },
        }
    return out
