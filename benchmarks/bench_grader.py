"""Grader benchmark (not a test): agreement with the labels and answers/s on ../shared/data/grader/*.jsonl against
math-verify and OpenRLHF's `grade_answer` (anchors, same run), the targets (PASS/FAIL), and a per-category table of
hand-written hard answer forms (benchmarks/hard_forms.py). Rows, warm-up and timing: docs/grading.md#measuring.

    .venv/bin/python benchmarks/bench_grader.py [--repeats 3]"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # hard_forms.py next to this file
DATA = ROOT.parent / "shared" / "data" / "grader"


def load_sets() -> dict[str, list[dict]]:
    sets = {}
    for f in sorted(DATA.glob("*.jsonl")):
        rows = [json.loads(line) for line in f.open()]
        sets[f.stem] = [r for r in rows if isinstance(r.get("response"), str)]
    sets["union"] = [r for name in list(sets) for r in sets[name]]
    return sets


def truth(r: dict) -> bool:
    return r["label"] in (True, "True", "true", 1)


_GRADERS: dict = {}


def warmup_pairs() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in (DATA.parent / "train" / "math_full.jsonl").open()][:200]
    return [(r["answer"], r["answer"]) for r in rows] + [(r["answer"], "1") for r in rows]


def run_ours(rows, cache: bool, policy: str = "final_answer") -> tuple[list[bool], float]:
    from lead_recipes.grading.pool.grader import Grader

    g = _GRADERS.get(cache)
    if g is None:
        g = _GRADERS[cache] = Grader(timeout_s=5.0, workers=2, cache_size=200_000 if cache else 0).start()
        g.grade_many([(a, None, b) for a, b in warmup_pairs()])
    g.clear_cache()
    t = time.perf_counter()
    out = g.grade_many([(r["answer"], r["response"], None, r.get("problem")) for r in rows], extraction=policy)
    dt = time.perf_counter() - t
    return [x.correct for x in out], dt


def run_math_verify(rows) -> tuple[list[bool], float]:
    from math_verify import parse, verify

    if "mv" not in _GRADERS:
        for a, b in warmup_pairs():
            verify(parse("$" + a + "$"), parse(b))
        _GRADERS["mv"] = True
    t = time.perf_counter()
    res = []
    for r in rows:
        try:
            res.append(bool(verify(parse("$" + r["answer"] + "$"), parse(r["response"]))))
        except Exception:  # noqa: BLE001 - the anchor as users run it: errors count as wrong
            res.append(False)
    return res, time.perf_counter() - t


def run_openrlhf(rows) -> tuple[list[bool], float]:
    from openrlhf.utils.math_utils import extract_boxed_answer, grade_answer

    t = time.perf_counter()
    res = []
    for r in rows:
        try:
            res.append(bool(grade_answer(extract_boxed_answer(r["response"]), r["answer"])))
        except Exception:  # noqa: BLE001
            res.append(False)
    return res, time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sets", default="", help="comma-separated subset of set names (default: all + union)")
    ap.add_argument("--hard-only", action="store_true", help="only the hard-form tables (no labelled sets)")
    args = ap.parse_args(argv)
    import logging

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    sets = load_sets()
    if args.sets or args.hard_only:
        sets = {k: v for k, v in sets.items() if k in args.sets.split(",")}
    graders = {
        "ours": lambda rows: run_ours(rows, True),
        "ours-boxed": lambda rows: run_ours(rows, True, "boxed"),
        "ours-nocache": lambda rows: run_ours(rows, False),
        "math-verify": run_math_verify,
        "openrlhf": run_openrlhf,
    }
    print(f"# load average at start: {os.getloadavg()}", file=sys.stderr, flush=True)
    table = []
    for name, rows in sets.items():
        labels = [truth(r) for r in rows]
        base_rate = None
        for gname, fn in graders.items():
            reps = args.repeats
            times, verdicts = [], None
            for _ in range(reps):
                verdicts, dt = fn(rows)
                times.append(dt)
            first, dt = len(rows) / times[0], statistics.median(times)
            agree = sum(v == lab for v, lab in zip(verdicts, labels)) / len(rows)
            rate = len(rows) / dt
            if gname == "math-verify":
                base_rate = rate
            table.append((name, len(rows), gname, agree, first, rate, reps))
            print(
                f"# {name:<18} {gname:<13} agree={agree:.4f} {rate:9.1f} ans/s ({dt:.2f}s, {reps} runs)",
                file=sys.stderr,
                flush=True,
            )
        for i, row in enumerate(table):
            if row[0] == name and base_rate:
                table[i] = row + (row[5] / base_rate,)
    hard = hard_form_table()
    for g in _GRADERS.values():
        if hasattr(g, "close"):
            g.close()
    print(f"\nload average at end: {os.getloadavg()}")
    print(
        "\n| set | n | grader | agreement with labels | answers/s, first pass | answers/s, median "
        "| × math-verify (median) | runs |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, n, gname, agree, first, rate, reps, ratio in table:
        print(f"| {name} | {n} | {gname} | {100 * agree:.1f}% | {first:,.0f} | {rate:,.0f} | {ratio:.2f}× | {reps} |")
    by = {(t[0], t[2]): t for t in table}
    print("\nTargets (ours = extraction final_answer):")
    for name in sets:
        if (name, "ours") in by and (name, "math-verify") in by:
            a, b = by[name, "ours"][3], by[name, "math-verify"][3]
            print(
                f"- {name}: agreement ours {100 * a:.1f}% >= math-verify {100 * b:.1f}%: {'PASS' if a >= b else 'FAIL'}"
            )
    if ("union", "ours") in by and ("union", "math-verify") in by:
        ratio = by["union", "ours"][7]
        print(f"- union: ours {ratio:.1f}x math-verify's answers/s (median) >= 5x: {'PASS' if ratio >= 5 else 'FAIL'}")
    print("\n| hard-form category | cases | ours | math-verify | OpenRLHF `grade_answer` |")
    print("|---|---:|---:|---:|---:|")
    for cat, (n, counts) in hard.items():
        print(f"| {cat} | {n} | " + " | ".join(f"{counts[k]}/{n}" for k in ("ours", "math-verify", "openrlhf")) + " |")
    print("\nreview_forms.py and release_forms.py cases, false positives / false negatives per split and kind:\n")
    print("\n".join(review_errors(hard)))
    return 0


def hard_form_table() -> dict[str, tuple[int, collections.Counter]]:
    """Per category of hard_forms.CASES: number of cases and, per grader, how many verdicts match the hand label
    (each case graded once; ours = the warmed `final_answer` pool, cache cleared)."""
    from hard_forms import CASES, response

    rows = [{"answer": c.gold, "response": response(c), "problem": c.problem} for c in CASES]
    verdicts = {
        "ours": run_ours(rows, True)[0],
        "math-verify": run_math_verify(rows)[0],
        "openrlhf": run_openrlhf(rows)[0],
    }
    out: dict[str, tuple[int, collections.Counter]] = {}
    held = collections.Counter()
    review = {s: collections.Counter() for s in sorted({c.review for c in CASES if c.review})}
    for i, c in enumerate(CASES):
        n, counts = out.get(c.category, (0, collections.Counter()))
        for k, v in verdicts.items():
            counts[k] += v[i] == c.correct
            held[k] += c.held and v[i] == c.correct
            if c.review:
                review[c.review][k] += v[i] == c.correct
                # false positives / negatives per kind of review_forms.py's cases, as "<kind> FP" / "<kind> FN"
                if v[i] != c.correct:
                    review[c.review][f"{k} {c.category} {'FP' if v[i] else 'FN'}"] += 1
        out[c.category] = (n + 1, counts)
    total = collections.Counter()
    for _n, counts in out.values():
        total.update(counts)
    out["all"] = (len(CASES), total)
    out["hard_forms.py held out (measured once)"] = (sum(c.held for c in CASES), held)
    for split, counts in review.items():
        out[f"split {split}"] = (sum(c.review == split for c in CASES), counts)
    return out


def review_errors(hard: dict[str, tuple[int, collections.Counter]]) -> list[str]:
    """Table rows: per split and kind of the review_forms.py / release_forms.py cases, the cases (right + wrong) and
    each grader's false positives / false negatives."""
    from hard_forms import CASES

    graders = ("ours", "math-verify", "openrlhf")
    rows = ["| split | kind | cases (right + wrong) | " + " | ".join(f"{g} FP / FN" for g in graders) + " |"]
    rows.append("|---|---|---:|" + "---:|" * len(graders))
    for split in sorted({c.review for c in CASES if c.review}):
        counts = hard[f"split {split}"][1]
        for cat in sorted({c.category for c in CASES if c.review == split}):
            right = sum(c.review == split and c.category == cat and c.correct for c in CASES)
            wrong = sum(c.review == split and c.category == cat and not c.correct for c in CASES)
            cells = [f"{counts[f'{g} {cat} FP']} / {counts[f'{g} {cat} FN']}" for g in graders]
            rows.append(f"| {split} | {cat} | {right} + {wrong} | " + " | ".join(cells) + " |")
    return rows


if __name__ == "__main__":
    sys.exit(main())
