"""Caller-side grading cost (not a test): per answer, what `Grader.submit` does in the calling process before any
worker (extraction under `final_answer` and `boxed`, normalisation, stated precision, `compare.prepare`) on the
labelled grader-validation responses, against math-verify's `parse` of the same responses (the anchor, main
thread, same run); medians over --repeats and the ratio. Runs on older checkouts too: docs/grading.md#measuring.

    .venv/bin/python benchmarks/bench_parent_side.py [--repeats 5]"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_grader import load_sets


def _caller_side():
    from lead_recipes.grading.extraction.answers import extract_final_answer, normalize_answer

    try:
        from lead_recipes.grading.equivalence.compare import prepare
    except ImportError:  # a checkout from before compare.py: time what its Grader did there, align_forms +
        # fast_verdict, so a before/after pair of runs compares the same work
        from lead_recipes.grading.equivalence.forms import align_forms
        from lead_recipes.grading.extraction.answers import fast_verdict

        def prepare(g, p):
            key = align_forms(g, p)
            return key, fast_verdict(*key)

    try:
        from lead_recipes.grading.equivalence.precision import DEFAULT_REL_TOL, stated_precision
    except ImportError:  # a checkout from before precision.py: no precision argument
        stated_precision = None

    def one(gold: str, response: str, policy: str, problem: str | None = None):
        try:
            ans = extract_final_answer(response, policy, gold)
        except TypeError:  # a checkout whose extraction takes no gold
            ans = extract_final_answer(response, policy)
        if ans is not None and stated_precision is not None:
            precision = stated_precision(problem) or ("rel", DEFAULT_REL_TOL)
            prepare(normalize_answer(gold), normalize_answer(ans), precision)
        elif ans is not None:
            prepare(normalize_answer(gold), normalize_answer(ans))

    return one


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import logging

    from math_verify import parse

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    rows = load_sets()["union"]
    one = _caller_side()
    for r in rows[:50]:  # warm regex caches and math-verify's parser
        one(r["answer"], r["response"], "final_answer", r.get("problem"))
        parse(r["response"])
    print(f"# load average at start: {os.getloadavg()}")
    times: dict[str, list[float]] = {"final_answer": [], "boxed": [], "math-verify parse": []}
    for _ in range(args.repeats):
        for policy in ("final_answer", "boxed"):
            t = time.perf_counter()
            for r in rows:
                one(r["answer"], r["response"], policy, r.get("problem"))
            times[policy].append(time.perf_counter() - t)
        t = time.perf_counter()
        for r in rows:
            try:
                parse(r["response"])
            except Exception:  # noqa: BLE001
                pass
        times["math-verify parse"].append(time.perf_counter() - t)
    anchor = len(rows) / statistics.median(times["math-verify parse"])
    print(f"# load average at end: {os.getloadavg()}")
    print("| caller side | answers/s (median) | × math-verify parse |\n|---|---:|---:|")
    for k, v in times.items():
        rate = len(rows) / statistics.median(v)
        print(f"| {k} | {rate:,.0f} | {rate / anchor:.1f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
