"""What the `final_answer` extraction policy changes against `boxed` (not a test): every response of the shared
rollouts and every benchmark reference solution is graded under both policies with the same grader, and the verdicts
that differ are counted by direction (e.g. `no_answer -> correct`), per source, with a few examples each.
Sources: docs/grading.md#measuring.

    .venv/bin/python benchmarks/policy_changes.py [--examples 2]"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def sources() -> dict[str, list[tuple[str, str]]]:
    """name -> [(gold, response)]."""
    out: dict[str, list[tuple[str, str]]] = {}
    for f in sorted((DATA / "rollouts").glob("*.jsonl")):
        rows = [json.loads(line) for line in f.open()]
        out[f"rollouts/{f.stem}"] = [(r["answer"], s["response"]) for r in rows for s in r["samples"]]
    for f in sorted((DATA / "benchmarks").glob("*.jsonl")):
        pairs = []
        for line in f.open():
            r = json.loads(line)
            sol = r.get("solution")
            if isinstance(sol, list):  # OlympiadBench: a list of solutions
                sol = sol[0] if sol else None
            if isinstance(sol, str) and sol.strip():
                pairs.append((r["answer"], sol))
        if pairs:
            out[f"benchmarks/{f.stem} (reference solutions)"] = pairs
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=2, help="examples printed per change direction")
    args = ap.parse_args(argv)
    import logging

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    from lead_recipes.grading.pool.grader import Grader

    print(f"load average at start: {os.getloadavg()}")
    rows = []
    with Grader(timeout_s=5.0, workers=2) as g:
        for name, pairs in sources().items():
            items = [(gold, resp, None) for gold, resp in pairs]
            boxed = g.grade_many(items, extraction="boxed")
            final = g.grade_many(items, extraction="final_answer")
            changes: collections.Counter = collections.Counter()
            examples: dict[str, list[str]] = collections.defaultdict(list)
            for (gold, _), b, f in zip(pairs, boxed, final):
                if b.status != f.status:
                    key = f"{b.status} -> {f.status}"
                    changes[key] += 1
                    if len(examples[key]) < args.examples:
                        examples[key].append(f"gold {gold!r}, stated {f.extracted!r}")
            acc_b = sum(x.correct for x in boxed) / len(pairs)
            acc_f = sum(x.correct for x in final) / len(pairs)
            rows.append((name, len(pairs), acc_b, acc_f, changes))
            for key, ex in examples.items():
                for e in ex:
                    print(f"# {name}: {key}: {e}", file=sys.stderr)
    print(f"load average at end: {os.getloadavg()}\n")
    print("| source | n | accuracy, boxed | accuracy, final_answer | verdicts changed | by direction |")
    print("|---|---:|---:|---:|---:|---|")
    for name, n, acc_b, acc_f, changes in rows:
        by = ", ".join(f"{k}: {v}" for k, v in changes.most_common()) or "none"
        print(f"| {name} | {n} | {100 * acc_b:.1f}% | {100 * acc_f:.1f}% | {sum(changes.values())} | {by} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
