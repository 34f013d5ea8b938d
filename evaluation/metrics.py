"""Evaluation metrics on graded samples: avg@n with its standard error, unbiased pass@k, Cons@k, length,
truncation and no-answer rates, the benchmark average and AES. Pure Python on plain lists; Cons@k's equivalence
goes through an `equivalent_many` callable. See docs/evaluation.md#metric-definitions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# O1-Pruner (Luo et al. 2025, arXiv 2501.12570) weights; our choices: docs/evaluation.md.
AES_ALPHA, AES_BETA, AES_GAMMA = 1.0, 3.0, 5.0


@dataclass(frozen=True)
class Vote:
    """One sample's contribution to a majority vote: its extracted answer (None = unparsable), whether it was
    truncated (hit the max-new-tokens cap) and whether it was graded correct against the gold answer."""

    answer: str | None
    truncated: bool
    correct: bool


def mean_and_stderr(per_problem: Sequence[float]) -> tuple[float, float]:
    """avg@n and its standard error over problems.

    acc = (1/M) Σ_i p_i, p_i = c_i / n_i (the mean single-sample accuracy of problem i, Sober-Reasoning's "pass@n");
    stderr = sd(p_1..p_M; ddof=1) / sqrt(M) (problems are the independent units; samples of a problem are
    clustered). M = 1 gives stderr 0. Empty input raises ValueError."""
    m = len(per_problem)
    if m == 0:
        raise ValueError("mean_and_stderr: no problems")
    mean = math.fsum(per_problem) / m
    if m == 1:
        return mean, 0.0
    var = math.fsum((p - mean) ** 2 for p in per_problem) / (m - 1)
    return mean, math.sqrt(var / m)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
    1 - C(n-c, k) / C(n, k), computed in the numerically stable product form
    1 - Π_{i=n-c+1}^{n} (1 - k/i); equals 1.0 when n - c < k. Requires 0 ≤ c ≤ n and 1 ≤ k ≤ n."""
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def default_ks(n: int) -> list[int]:
    """The k values reported for n samples: powers of two below n, and n itself (1, 2, 4, ..., n)."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return ks + [n]


def majority_vote(votes: Sequence[Vote], equivalent_many: Callable[[list[tuple[str, str]]], list[bool]]) -> bool:
    """Cons@k verdict of one problem; see `majority_votes`."""
    return majority_votes([votes], equivalent_many)[0]


def _vote_plan(votes: Sequence[Vote]):
    """(verdict or None, correct_idx, wrong distinct answers in first-appearance order, first index, counts)."""
    voting = [(i, v) for i, v in enumerate(votes) if v.answer is not None and not v.truncated]
    correct_idx = [i for i, v in voting if v.correct]
    wrong = [(i, v.answer.strip()) for i, v in voting if not v.correct]
    if not correct_idx:
        return False, None, None, None, None
    if len(correct_idx) > len(wrong):
        return True, None, None, None, None
    first: dict[str, int] = {}
    count: dict[str, int] = {}
    for i, a in wrong:
        first.setdefault(a, i)
        count[a] = count.get(a, 0) + 1
    return None, correct_idx, sorted(first, key=first.get), first, count


def majority_votes(
    problems: Sequence[Sequence[Vote]], equivalent_many: Callable[[list[tuple[str, str]]], list[bool]]
) -> list[bool]:
    """Cons@k verdicts (our convention, see docs/evaluation.md): True iff the largest answer class is correct.

    - Unparsable (answer None) and truncated samples do not vote; if none vote, the problem is wrong.
    - Classes are answer-equivalence classes. Every answer graded correct is equivalent to the gold answer, so all
      correct votes form one class (transitivity through the gold); a wrong answer cannot be equivalent to a
      correct one. Wrong answers are clustered greedily in sample order with `equivalent_many((rep, answer))`
      against each class's earliest answer, after merging identical strings (O1-Pruner `result_analysis.py`
      grouping, with math-verify equivalence).
    - Ties break by the earliest sample index of each class (deterministic; verl's `calc_maj_val` keeps the
      first-inserted key among ties).
    Grader calls are skipped when they cannot change the verdict (no correct vote, or more correct votes than
    wrong ones), and all needed pairs of all problems go to the grader in one batch."""
    plans = [_vote_plan(v) for v in problems]
    needed = sorted(
        {(d[a], d[b]) for verdict, _, d, _, _ in plans if verdict is None for b in range(len(d)) for a in range(b)}
    )
    eq = dict(zip(needed, equivalent_many(needed))) if needed else {}
    out = []
    for verdict, correct_idx, distinct, first, count in plans:
        if verdict is not None:
            out.append(verdict)
            continue
        classes: list[list[str]] = []  # each class: [representative, members...]
        for ans in distinct:
            for cls in classes:
                if eq[(cls[0], ans)]:
                    cls.append(ans)
                    break
            else:
                classes.append([ans])
        best_wrong = max((sum(count[a] for a in cls), -first[cls[0]]) for cls in classes)
        out.append((len(correct_idx), -correct_idx[0]) > best_wrong)
    return out


def aes(
    acc_model: float,
    len_model: float,
    acc_base: float,
    len_base: float,
    alpha: float = AES_ALPHA,
    beta: float = AES_BETA,
    gamma: float = AES_GAMMA,
) -> dict:
    """Accuracy-Efficiency Score (O1-Pruner, Luo et al. 2025, arXiv 2501.12570):
    ΔL = (L_base - L_model)/L_base, ΔA = (A_model - A_base)/A_base,
    AES = α·ΔL + β·|ΔA| if ΔA ≥ 0 else α·ΔL − γ·|ΔA|; defaults α=1, β=3, γ=5.
    Returns {"aes", "delta_length", "delta_accuracy", "reason"}; A_base = 0 (ΔA undefined) or L_base = 0 gives
    null values with the reason instead of inf/NaN."""
    out = {
        "aes": None,
        "delta_length": None,
        "delta_accuracy": None,
        "reason": None,
        "alpha": alpha,
        "beta": beta,
        "gamma": gamma,
    }
    if not len_base > 0:
        out["reason"] = f"base mean length is {len_base}; delta_length undefined"
        return out
    out["delta_length"] = (len_base - len_model) / len_base
    if not acc_base > 0:
        out["reason"] = f"base accuracy is {acc_base}; delta_accuracy undefined (division by zero)"
        return out
    d_acc = (acc_model - acc_base) / acc_base
    out["delta_accuracy"] = d_acc
    weight = beta if d_acc >= 0 else -gamma
    out["aes"] = alpha * out["delta_length"] + weight * abs(d_acc)
    return out


def benchmark_metrics(problems: Sequence[Sequence[dict]], equivalent_many, ks: Sequence[int] | None = None) -> dict:
    """All per-benchmark metrics from graded samples. `problems` holds, per problem, its samples in sample order,
    each a dict with "correct" (bool), "status" (grader status), "extracted" (str|None), "num_tokens" (int),
    "truncated" (bool, or None when unknown). Every problem must have the same n ≥ 1 samples.

    accuracy = avg@n (mean_and_stderr); accuracy_seed_std = sd over sample indices s of the accuracy of the s-th
    sample set (Sober reports the std across seeds); pass_at_k[k] = mean_i pass_at_k(n, c_i, k);
    cons_at_k[k] = mean_i majority_vote(first k samples of i); mean_length = mean over all samples of num_tokens
    (thinking included, truncated ones at the cap) — the mean of per-problem means equals it since n is fixed;
    truncation_rate, no_answer_rate = fractions of samples; truncation_rate is None when some sample's truncation is
    unknown (a replay without the cap; such a sample votes in Cons@k)."""
    if not problems:
        raise ValueError("benchmark_metrics: no problems")
    n = len(problems[0])
    if n == 0 or any(len(p) != n for p in problems):
        raise ValueError("benchmark_metrics: every problem needs the same number (>= 1) of samples")
    ks = sorted({k for k in (ks or default_ks(n)) if 1 <= k <= n})
    counts = [sum(bool(s["correct"]) for s in p) for p in problems]
    per_problem = [c / n for c in counts]
    acc, se = mean_and_stderr(per_problem)
    seed_accs = [sum(bool(p[s]["correct"]) for p in problems) / len(problems) for s in range(n)]
    seed_std = mean_and_stderr(seed_accs)[1] * math.sqrt(n) if n > 1 else 0.0
    samples = [s for p in problems for s in p]
    total = len(samples)
    votes = [[Vote(s["extracted"], bool(s["truncated"]), bool(s["correct"])) for s in p] for p in problems]
    verdicts = majority_votes([v[:k] for k in ks for v in votes], equivalent_many)
    m = len(problems)
    cons = {str(k): sum(verdicts[j * m : (j + 1) * m]) / m for j, k in enumerate(ks)}
    return {
        "accuracy": acc,
        "accuracy_stderr": se,
        "accuracy_seed_std": seed_std,
        "pass_at_k": {str(k): math.fsum(pass_at_k(n, c, k) for c in counts) / len(problems) for k in ks},
        "cons_at_k": cons,
        "mean_length": math.fsum(float(s["num_tokens"]) for s in samples) / total,
        "truncation_rate": (
            None if any(s["truncated"] is None for s in samples) else sum(s["truncated"] for s in samples) / total
        ),
        "no_answer_rate": sum(s["status"] == "no_answer" for s in samples) / total,
        "n_problems": len(problems),
        "n_samples": n,
    }


def average(per_benchmark: dict[str, dict]) -> dict:
    """The papers' benchmark average: the unweighted mean over benchmarks of accuracy and of mean_length
    (LEAD/Sober "Avg." and "Average Length"), not pooled over problems."""
    if not per_benchmark:
        raise ValueError("average: no benchmarks")
    b = list(per_benchmark.values())
    return {
        "accuracy": math.fsum(m["accuracy"] for m in b) / len(b),
        "mean_length": math.fsum(m["mean_length"] for m in b) / len(b),
        "n_benchmarks": len(b),
    }


def l1_budget_sweep(runs: dict[int, tuple[dict, list[dict]]], l1_mode: str) -> dict:
    """The budget sweep of an L1 model: `runs` maps each budget B to the (summary, sample rows) of a run whose
    prompts asked for B tokens. Per budget and benchmark: accuracy, mean length, truncation rate and L1's
    mean_abs_deviation = mean |num_tokens − B| (arXiv 2503.04697's length error); the average over benchmarks."""
    out: dict = {"mode": "l1_prompt", "l1_mode": l1_mode, "budgets": {}}
    for budget, (summary, rows) in sorted(runs.items()):
        per = {}
        for name, m in summary["benchmarks"].items():
            lengths = [float(r["num_tokens"]) for r in rows if r["benchmark"] == name]
            per[name] = {
                "accuracy": m["accuracy"],
                "mean_length": m["mean_length"],
                "truncation_rate": m["truncation_rate"],
                "mean_abs_deviation": math.fsum(abs(x - budget) for x in lengths) / len(lengths),
            }
        out["budgets"][str(budget)] = {
            "benchmarks": per,
            "average": {
                key: math.fsum(v[key] for v in per.values()) / len(per)
                for key in ("accuracy", "mean_length", "mean_abs_deviation")
            },
        }
    return out


def aes_report(model: dict, base: dict) -> dict:
    """AES of a run against a base run, both summary dicts with "benchmarks" and "average": the headline on
    the benchmark-averaged accuracy and length, plus one per benchmark the two runs share. Note the mean of
    per-benchmark AES differs from the AES of the means. Only like is compared with like: a benchmark whose problem
    count or samples per problem differ gets no AES, and the headline none unless both runs cover the same
    benchmarks alike; each says why in its "reason"."""
    out, unlike = {"per_benchmark": {}}, []
    mine, theirs = sorted(model["benchmarks"]), sorted(base["benchmarks"])
    if mine != theirs:
        unlike.append(f"runs cover different benchmarks (model {mine} vs base {theirs})")
    for name, m in model["benchmarks"].items():
        if name in base["benchmarks"]:
            b = base["benchmarks"][name]
            out["per_benchmark"][name] = aes(m["accuracy"], m["mean_length"], b["accuracy"], b["mean_length"])
            differ = next(
                (
                    f"{what} differ (model {m.get(key)} vs base {b.get(key)})"
                    for key, what in (("n_problems", "problems"), ("n_samples", "samples per problem"))
                    if m.get(key) != b.get(key)
                ),
                None,
            )
            if differ:
                out["per_benchmark"][name].update(aes=None, reason=f"not comparable: {differ}")
                unlike.append(f"{name}: {differ}")
    a, b = model["average"], base["average"]
    out["overall"] = aes(a["accuracy"], a["mean_length"], b["accuracy"], b["mean_length"])
    if unlike:
        out["overall"].update(aes=None, reason="not comparable: " + "; ".join(unlike))
    return out
