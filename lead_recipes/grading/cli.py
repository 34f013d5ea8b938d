"""`lead-recipes grade --input IN.jsonl --output OUT.jsonl`: grade a JSONL file of model answers (a `response` to
extract from, or a `given_answer`) against each row's `answer` (and its `problem`'s stated precision), streamed in
batches; each output row is the input row plus `correct`, `status`, `extracted` and `extraction`. A malformed line
is written as an error row and makes the exit code 1. It calls no model and changes no input field.
See docs/grading.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from typing import Iterator

from lead_recipes.grading.labels import gold_answer, label_problem
from lead_recipes.grading.options import REPORT_EXTRACTION, add_options, grader_kwargs
from lead_recipes.grading.pool.grader import STATUSES, Grader
from lead_recipes.help_format import ArgumentParser
from lead_recipes.progress import Bar

BATCH = 512


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="lead-recipes grade", description="grade a JSONL file of model answers")
    p.add_argument(
        "--input", required=True, help="JSONL with `answer` and `response` or `given_answer` (and optionally `problem`)"
    )
    p.add_argument("--output", required=True, help="JSONL to write (input + correct, status, extracted)")
    add_options(
        p.add_argument_group("grade"),
        ("use", "extraction", "timeout_s", "workers", "rel_tol", "problem_precision_enable", "progress_enable"),
        extraction=REPORT_EXTRACTION,
    )
    return p


def _rows(path: str) -> Iterator[tuple[int, dict, str | None]]:
    """(line number, row, error) for each non-blank line; malformed lines come back as error rows."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                yield n, {"_line": n, "_raw": line.rstrip("\n")}, f"line {n}: invalid JSON ({e.msg})"
                continue
            if not isinstance(row, dict):
                yield n, {"_line": n, "_raw": row}, f"line {n}: not a JSON object"
            elif "answer" not in row:
                yield n, row, f"line {n}: no `answer` field"
            elif row["answer"] is None:
                yield n, row, f"line {n}: `answer` is null"
            elif label_problem(row["answer"]):
                yield n, row, f"line {n}: `answer`: {label_problem(row['answer'])}"
            else:
                yield n, row, None


def _count_lines(path: str) -> int:
    """Lines in the file (a last line without a newline counts), read in 1 MiB chunks: the progress bar's total."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def _item(row: dict, use: str) -> tuple[object, str | None, str | None, str | None]:
    problem = row.get("problem") if isinstance(row.get("problem"), str) else None
    if use == "response" or (use == "auto" and isinstance(row.get("response"), str)):
        return gold_answer(row["answer"]), row.get("response") or "", None, problem
    given = row.get("given_answer") if row.get("given_answer") is not None else ""
    return gold_answer(row["answer"]), None, given, problem


def main(argv: list[str]) -> int:
    args = vars(build_parser().parse_args(argv))
    if not os.path.isfile(args["input"]):
        print(f"lead-recipes grade: input file not found: {args['input']}", file=sys.stderr)
        return 2
    try:
        os.makedirs(os.path.dirname(os.path.abspath(args["output"])), exist_ok=True)
    except OSError as e:
        print(
            f"lead-recipes grade: cannot create the folder of --output {args['output']}: {e.strerror or e}",
            file=sys.stderr,
        )
        return 2
    counts: collections.Counter = collections.Counter()  # graded rows by status; malformed lines are apart
    fields: collections.Counter = collections.Counter()  # graded rows by the field graded (response, given_answer)
    malformed = 0
    t0 = time.perf_counter()
    tmp = args["output"] + ".tmp"
    lines = _count_lines(args["input"]) if args["grade.progress_enable"] else 0
    bar = Bar(lines, "grading", "line")
    read_to = 0  # the last line number read: the bar counts lines, blank ones included, so it ends at its total
    policy = args["grade.extraction"]
    with (
        Grader(**grader_kwargs(args)) as grader,
        open(tmp, "w", encoding="utf-8") as out,
    ):
        batch: list[tuple[dict, str | None]] = []

        def flush() -> None:
            todo = [(i, _item(row, args["grade.use"])) for i, (row, err) in enumerate(batch) if err is None]
            todo_item = dict(todo)
            grades = dict(zip((i for i, _ in todo), grader.grade_many([it for _, it in todo])))
            for i, (row, err) in enumerate(batch):
                if err is not None:
                    row = {**row, "correct": False, "status": "error", "extracted": None, "error": err}
                else:
                    g = grades[i]
                    row = {
                        **row,
                        "correct": g.correct,
                        "status": g.status,
                        "extracted": g.extracted,
                        "extraction": policy if todo_item[i][1] is not None else None,
                    }
                    counts[row["status"]] += 1
                    fields["response" if todo_item[i][1] is not None else "given_answer"] += 1
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
            bar.advance_to(read_to)
            batch.clear()

        for read_to, row, err in _rows(args["input"]):  # noqa: B007 (read after the loop)
            if err is not None:
                malformed += 1
                print(f"lead-recipes grade: {err}", file=sys.stderr)
            batch.append((row, err))
            if len(batch) >= BATCH:
                flush()
        read_to = lines  # trailing blank lines
        flush()
    bar.close()
    os.replace(tmp, args["output"])
    total = sum(counts.values())
    dt = time.perf_counter() - t0
    parts = ", ".join(f"{s} {counts.get(s, 0)}" for s in STATUSES)
    acc = counts.get("correct", 0) / total if total else 0.0
    print(
        f"graded {total} rows in {dt:.1f}s ({total / dt if dt > 0 else 0:.0f} rows/s): accuracy {acc:.4f} "
        f"({counts.get('correct', 0)}/{total}); {_graded_fields(fields, policy)}; {parts}; malformed input lines "
        f"{malformed} (written as error rows, not in the accuracy) -> {args['output']}"
    )
    return 1 if malformed else 0


def _graded_fields(fields: collections.Counter, policy: str) -> str:
    """Which field was graded; the extraction policy only where a response was extracted from."""
    extraction = f"(extraction {policy})"
    if not fields["given_answer"]:
        return f"graded response {extraction}"
    if not fields["response"]:
        return "graded given_answer (no extraction)"
    return f"graded response {fields['response']} {extraction}, given_answer {fields['given_answer']}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
