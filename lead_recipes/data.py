"""`lead-recipes data`: `build` selects, cleans (duplicates, benchmark problems) and templates a prompt dataset for
OpenRLHF with a JSON report of every removed problem; `curriculum` builds the GRPO-LEAD stage-2 set from the trainer's
per-problem records (the selection is lead_recipes/curriculum.py). It downloads nothing itself except through
`datasets` for hub ids, and never grades. See docs/launch.md#lead-recipes-data.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Iterable

from lead_recipes import length_prompts
from lead_recipes.benchmarks import BENCHMARKS, default_benchmarks_dir
from lead_recipes.curriculum import hard_problems, problem_accuracy, seeded_rows
from lead_recipes.grading.labels import LabelError, gold_answer
from lead_recipes.help_format import ArgumentParser
from lead_recipes.jsonl import parse_jsonl
from lead_recipes.prompts import PROMPT_TEMPLATES, fill_template, resolve_template, system_prompt

PRESETS = ("math-l35", "math", "deepscaler", "dapo", "jsonl")
# DAPO-Math-17k wraps each problem in its own "Answer:"-line instruction; preset `dapo` strips it so that the recipe's
# template alone states the answer format the reward reads.
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem."
)
DAPO_SUFFIX = 'Remember to put your answer on its own line after "Answer:".'

BUILD_KEY_DEFAULTS = {"problem_key": "problem", "answer_key": "answer", "id_key": "id"}
_LATEX_NOISE = re.compile(r"\\left|\\right|\\displaystyle|\\[,;:! ]|\\\[|\\\]|\\\(|\\\)|[\s${}.,;:!?]")


def normalize_problem(text: str) -> str:
    """Text key for de-duplication and benchmark matching: lower case, without whitespace, `$`, braces, sentence
    punctuation, display-math delimiters and \\left/\\right/\\displaystyle; `\\dfrac`/`\\tfrac` read as `\\frac`.
    Operators, digits and letters are kept, so 'z^4 - z^2' and 'z^4 + z^2' stay different problems."""
    text = text.lower().replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return _LATEX_NOISE.sub("", text)


# ---------------------------------------------------------------- reading sources
def read_rows(source: str, split: str = "train") -> list[dict]:
    """Rows of a local .jsonl/.json/.parquet file, or of a hub dataset (`datasets.load_dataset(source, split)`)."""
    path = Path(source)
    if path.exists():
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json" and text.lstrip().startswith("["):
            return json.loads(text)
        return parse_jsonl(text, path)
    if source.startswith(("/", ".")) or source.endswith((".jsonl", ".json", ".parquet")):
        raise FileNotFoundError(f"source {source} does not exist")
    try:
        import datasets
    except ImportError:
        raise ImportError(f"{source!r} is not a local file; loading it from the hub needs `datasets`") from None
    return list(datasets.load_dataset(source, split=split))


def _level(value) -> int | None:
    match = re.search(r"\d+", str(value)) if value is not None else None
    return int(match.group()) if match else None


def _is_numeric(answer: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?|-?\\frac\{\d+\}\{\d+\}|-?\d+/\d+", answer.replace(",", "").strip()) is not None


def field(row: dict, key: str):
    """row[key], where a dotted key reaches into nested mappings ('reward_model.ground_truth') and a chat-message
    list yields the content of its last user turn (hub sets that store the problem as messages)."""
    value = row
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(key)
        value = value[part]
    if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
        users = [m["content"] for m in value if m.get("role", "user") == "user"]
        value = users[-1] if users else value[-1]["content"]
    return value


def strip_dapo_instruction(text: str) -> str:
    """The problem inside DAPO-Math-17k's prompt, without its answer-format instruction (text without it: as is)."""
    text = text.strip()
    if text.startswith(DAPO_PREFIX):
        text = text[len(DAPO_PREFIX) :]
    if text.endswith(DAPO_SUFFIX):
        text = text[: -len(DAPO_SUFFIX)]
    return text.strip()


def select(rows: list[dict], args) -> tuple[list[dict], dict]:
    """Apply the preset's filters; returns (kept rows as {"id","problem","answer",...}, counts of dropped rows)."""
    dropped: dict[str, int] = defaultdict(int)
    levels = {int(x) for x in args.levels.split(",")} if args.levels else None
    subjects = {s.strip().lower() for s in args.subjects.split(",")} if args.subjects else None
    out = []
    for i, row in enumerate(rows):
        try:
            problem, answer = field(row, args.problem_key), field(row, args.answer_key)
        except KeyError as exc:
            raise ValueError(
                f"row {i}: no field {exc} (set --data.problem_key/--data.answer_key); fields: {sorted(row)}"
            ) from None
        try:  # a label object: its gold answer, never its string form
            answer = gold_answer(answer)
        except LabelError as exc:
            raise ValueError(f"row {i}: --data.answer_key {args.answer_key!r}: {exc}") from None
        if isinstance(answer, (list, tuple)):
            answer = ", ".join(str(a) for a in answer)
        problem, answer = str(problem or "").strip(), str(answer if answer is not None else "").strip()
        if getattr(args, "preset", None) == "dapo":
            problem = strip_dapo_instruction(problem)
        if not problem or not answer or answer == "None":
            dropped["empty problem or answer"] += 1
            continue
        if levels is not None and _level(row.get("level")) not in levels:
            dropped["level filter"] += 1
            continue
        if subjects is not None and str(row.get("subject", row.get("type", ""))).strip().lower() not in subjects:
            dropped["subject filter"] += 1
            continue
        if args.split_filter and str(row.get("split", "")) != args.split_filter:
            dropped["split filter"] += 1
            continue
        if args.min_difficulty is not None or args.max_difficulty is not None or args.above_difficulty is not None:
            try:
                difficulty = float(row.get("difficulty"))
            except (TypeError, ValueError):
                dropped["no difficulty"] += 1
                continue
            if (
                (args.min_difficulty is not None and difficulty < args.min_difficulty)
                or (args.max_difficulty is not None and difficulty > args.max_difficulty)
                or (args.above_difficulty is not None and difficulty <= args.above_difficulty)
            ):
                dropped["difficulty filter"] += 1
                continue
        if args.numeric_only and not _is_numeric(answer):
            dropped["non-numeric answer"] += 1
            continue
        try:
            rid = str(field(row, args.id_key))
        except KeyError:
            rid = f"{Path(str(args.source)).stem}-{i}"
        kept = {"id": rid, "problem": problem, "answer": answer}
        if args.response_key:  # SFT data: the target solution goes to `response` (--data.output_key response)
            kept["response"] = str(field(row, args.response_key))
        for extra in ("level", "subject", "difficulty", "source"):
            if row.get(extra) is not None:
                kept[extra] = row[extra]
        out.append(kept)
    return out, dict(dropped)


def benchmark_index(names: Iterable[str], benchmarks_dir: str | None) -> dict[str, list[str]]:
    """normalised problem text -> ["benchmark:id", ...] for the evaluation benchmarks (same loader as eval)."""
    from lead_recipes.benchmarks import load_benchmarks

    index: dict[str, list[str]] = defaultdict(list)
    for name, problems in load_benchmarks(list(names), data_dir=benchmarks_dir).items():
        for p in problems:
            index[normalize_problem(p.problem)].append(f"{name}:{p.id}")
    return index


def clean(rows: list[dict], bench: dict[str, list[str]] | None, dedup: bool) -> tuple[list[dict], list[dict]]:
    """Drop duplicates (first occurrence kept) and benchmark problems; returns (kept, removed-with-reason)."""
    kept, removed, seen = [], [], {}
    for row in rows:
        key = normalize_problem(row["problem"])
        if bench is not None and key in bench:
            removed.append(
                {"id": row["id"], "reason": "benchmark", "matches": bench[key], "problem": row["problem"][:200]}
            )
        elif dedup and key in seen:
            removed.append(
                {"id": row["id"], "reason": "duplicate", "duplicate_of": seen[key], "problem": row["problem"][:200]}
            )
        else:
            seen.setdefault(key, row["id"])
            kept.append(row)
    return kept, removed


def render(row: dict, template: str, fmt: str, system: str | None) -> dict:
    text = fill_template(resolve_template(template)[1], row["problem"])
    if fmt == "messages":
        prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    else:
        prompt = text
    return {"prompt": prompt, "label": row["answer"], **{k: v for k, v in row.items() if k != "answer"}}


def write_jsonl(path: str, rows: Iterable[dict]) -> int:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp, n = f"{path}.tmp", 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)  # a crash never leaves a half-written dataset under the final name
    return n


# ---------------------------------------------------------------- curriculum (GRPO-LEAD stage 2)
def curriculum(args) -> int:
    records = read_rows(args.problems)
    acc = problem_accuracy(records, args.since_step)
    template = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        template = AutoTokenizer.from_pretrained(args.tokenizer).apply_chat_template
    dataset = read_rows(args.dataset)
    picked, matched, report = hard_problems(dataset, acc, args.threshold, args.min_attempts, template)
    if matched == 0:
        print(
            f"lead-recipes data curriculum: none of the {len(dataset)} rows of {args.dataset} matches a record in "
            f"{args.problems} ({len(acc)} problem keys); is it the stage-1 dataset? (chat-templated prompt hashes "
            "need --curriculum.tokenizer)",
            file=sys.stderr,
        )
        return 2
    merged = list(picked)
    seen = {normalize_problem(str(r.get("problem", r.get("prompt")))) for r in picked}
    merged_from = {}
    for path in args.merge:
        n = 0
        for row in read_rows(path):
            key = normalize_problem(str(row.get("problem", row.get("prompt"))))
            if key not in seen:
                seen.add(key)
                merged.append(row)
                n += 1
        merged_from[path] = n
    if args.seed is not None:
        merged = seeded_rows(merged, args.seed, args.skip, args.rows)
    elif args.skip or args.rows:
        print("lead-recipes data curriculum: --curriculum.skip/--curriculum.rows need --seed", file=sys.stderr)
        return 2
    written = write_jsonl(args.out, merged)
    summary = {
        "records": len(records),
        "problems_with_records": len({id(entry) for entry in acc.values()}),  # one entry under each of its keys
        "dataset_rows": len(dataset),
        "matched": matched,
        "selected": len(picked),
        "threshold": args.threshold,
        "merged": merged_from,
        "seed": args.seed,
        "skip": args.skip,
        "rows": args.rows,
        "written": written,
        "out": args.out,
        "selected_problems": report,
    }
    _report(args, summary)
    print(
        f"curriculum: {len(picked)} of {matched} matched problems have accuracy <= {args.threshold}; "
        f"+{sum(merged_from.values())} merged -> {written} rows in {args.out}"
    )
    return 0


# ---------------------------------------------------------------- CLI
def build(args) -> int:
    preset_defaults = {
        "math-l35": {"levels": None},
        "math": {"levels": "3,4,5"},
        "deepscaler": {},
        "jsonl": {},
        "dapo": {"problem_key": "prompt", "answer_key": "reward_model.ground_truth", "id_key": "extra_info.index"},
    }
    for key, value in preset_defaults[args.preset].items():
        if getattr(args, key) in (None, BUILD_KEY_DEFAULTS.get(key)) and value is not None:
            setattr(args, key, value)
    rows = read_rows(args.source, args.split)
    selected, dropped = select(rows, args)
    bench = benchmark_index(args.benchmarks.split(","), args.benchmarks_dir) if args.decontaminate else None
    kept, removed = clean(selected, bench, dedup=args.dedup)
    if args.seed is not None:  # OpenRLHF's data.max_samples keeps the first N rows: make them a random draw
        random.Random(args.seed).shuffle(kept)
    if args.limit:
        kept = kept[: args.limit]
    system = system_prompt(args.system, args.length_limit)
    rendered = (render(r, args.template, args.format, system) for r in kept)
    l1: dict = {}
    written = write_jsonl(args.out, length_prompts.attach_targets(rendered, args, l1) if args.l1_mode else rendered)
    by_bench: dict[str, int] = defaultdict(int)
    for r in removed:
        for m in r.get("matches", []):
            by_bench[m.split(":")[0]] += 1
    summary = {
        "preset": args.preset,
        "source": args.source,
        "read": len(rows),
        "selected": len(selected),
        "dropped_by_filter": dropped,
        "removed_duplicates": sum(r["reason"] == "duplicate" for r in removed),
        "removed_benchmark": sum(r["reason"] == "benchmark" for r in removed),
        "removed_benchmark_by_name": dict(by_bench),
        "written": written,
        "out": args.out,
        "template": args.template,
        "seed": args.seed,
        "system_prompt": system if args.format == "messages" else None,
        "l1": length_prompts.report(l1),
        "removed": removed,
    }
    _report(args, summary)
    removed_text = _counted(summary["removed_duplicates"], "duplicate")
    if args.decontaminate:
        names = ", ".join(f"{name} {n}" for name, n in sorted(by_bench.items()))
        removed_text += f" and {_counted(summary['removed_benchmark'], 'benchmark problem')}"
        removed_text += f" ({names})" if names else ""
    else:
        removed_text += " (benchmark problems kept: --no-data.decontaminate_enable)"
    print(
        f"{args.preset}: read {len(rows)}, selected {len(selected)}, removed {removed_text}, wrote {written} rows "
        f"to {args.out}"
    )
    return 0


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _report(args, summary: dict) -> None:
    path = args.report or f"{args.out}.report.json"
    Path(path).write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    print(f"report: {path}")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="lead-recipes data", description="build OpenRLHF prompt datasets and GRPO-LEAD stage-2 curricula"
    )
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="select, clean and template a prompt dataset")
    b.add_argument("--input", dest="source", required=True, help="local .jsonl/.json/.parquet, or a hub dataset id")
    b.add_argument("--output", dest="out", required=True, help="output JSONL")
    b.add_argument("--limit", type=int, help="write at most N rows (default: all)")
    b.add_argument(
        "--seed",
        type=int,
        help="shuffle the rows with this seed (recorded in the report), so that the "
        "first N rows (OpenRLHF's data.max_samples) are a random draw (default: the source's order)",
    )
    d = b.add_argument_group("data")
    d.add_argument(
        "--data.preset",
        dest="preset",
        choices=PRESETS,
        required=True,
        help="the source's layout and selection: math-l35 (SimpleRL MATH level 3-5 as is), math (full MATH, levels "
        "3,4,5), deepscaler, dapo (DAPO-Math-17k fields, its Answer:-line instruction removed), jsonl (any "
        "file with the --data.*_key fields)",
    )
    d.add_argument("--data.split", dest="split", default="train", help="hub split (default train)")
    d.add_argument("--data.report", dest="report", help="JSON report path (default OUTPUT.report.json)")
    d.add_argument(
        "--data.problem_key",
        dest="problem_key",
        default=BUILD_KEY_DEFAULTS["problem_key"],
        help="field with the problem (dotted for nested; a chat message list gives its last user turn)",
    )
    d.add_argument(
        "--data.answer_key",
        dest="answer_key",
        default=BUILD_KEY_DEFAULTS["answer_key"],
        help="field with the gold answer (dotted for nested)",
    )
    d.add_argument("--data.id_key", dest="id_key", default=BUILD_KEY_DEFAULTS["id_key"], help="field with the id")
    d.add_argument(
        "--data.response_key",
        dest="response_key",
        help="field copied to `response` (SFT data: the solution to imitate; default: none)",
    )
    d.add_argument(
        "--data.benchmarks",
        dest="benchmarks",
        default=",".join(BENCHMARKS),
        help="benchmarks whose problems are removed",
    )
    d.add_argument(
        "--data.benchmarks_dir",
        dest="benchmarks_dir",
        default=default_benchmarks_dir(),
        help="directory of <benchmark>.jsonl (default: $LEAD_RECIPES_BENCHMARKS_DIR, else ./data/benchmarks if "
        "it exists, else the hub); the same flag and variable as lead-recipes eval",
    )
    d.add_argument(
        "--data.decontaminate_enable",
        dest="decontaminate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="remove the problems of --data.benchmarks",
    )
    d.add_argument(
        "--data.dedup_enable",
        dest="dedup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="remove duplicate problems (the first is kept)",
    )
    f = b.add_argument_group("filter", "row selection (default: every row)")
    f.add_argument(
        "--filter.levels", dest="levels", help="comma-separated MATH levels (default: all; preset math: 3,4,5)"
    )
    f.add_argument(
        "--filter.subjects",
        dest="subjects",
        help="comma-separated MATH subjects, e.g. 'Algebra,Number Theory' (default: all)",
    )
    f.add_argument(
        "--filter.split",
        dest="split_filter",
        help="keep rows whose `split` field equals this (MATH: train/test; default: all)",
    )
    f.add_argument(
        "--filter.min_difficulty",
        dest="min_difficulty",
        type=float,
        help="keep difficulty >= this (GRPO-LEAD: 2.5 on DeepScaleR; default: no bound)",
    )
    f.add_argument(
        "--filter.max_difficulty", dest="max_difficulty", type=float, help="keep difficulty <= this (default: no bound)"
    )
    f.add_argument(
        "--filter.above_difficulty",
        dest="above_difficulty",
        type=float,
        help="keep difficulty > this (GRPO-LEAD SFT data: > 1; default: no bound)",
    )
    f.add_argument(
        "--filter.numeric_only_enable",
        dest="numeric_only",
        action="store_true",
        help="keep integer/decimal/simple-fraction answers only",
    )
    t = b.add_argument_group("prompt")
    t.add_argument(
        "--prompt.template",
        dest="template",
        default="deepscaler",
        help=f"{', '.join(PROMPT_TEMPLATES)} (lead_recipes/prompts.py) or a custom string with {{problem}}",
    )
    t.add_argument(
        "--prompt.format",
        dest="format",
        choices=("text", "messages"),
        default="text",
        help="prompt as text (train with --data.apply_chat_template) or chat messages",
    )
    t.add_argument(
        "--prompt.system",
        dest="system",
        help="system message (messages format only; default: none); `thinkprune`: ThinkPrune's",
    )
    length_prompts.add_flags(b, t)
    c = sub.add_parser("curriculum", help="GRPO-LEAD stage 2: hard stage-1 problems + other sets")
    c.add_argument("--output", dest="out", required=True, help="output JSONL")
    c.add_argument(
        "--seed",
        type=int,
        help="write a seeded order (passes reshuffled while --curriculum.rows needs more; default: the "
        "dataset's order)",
    )
    c.add_argument_group("data").add_argument(
        "--data.report", dest="report", help="JSON report path (default OUTPUT.report.json)"
    )
    g = c.add_argument_group("curriculum")
    g.add_argument(
        "--curriculum.problems", dest="problems", required=True, help="recipe_problems.jsonl written by the trainer"
    )
    g.add_argument(
        "--curriculum.dataset",
        dest="dataset",
        required=True,
        help="the stage-1 prompt dataset (lead-recipes data build output)",
    )
    g.add_argument(
        "--curriculum.threshold",
        dest="threshold",
        type=float,
        default=0.75,
        help="keep accuracy <= this (default 0.75)",
    )
    g.add_argument(
        "--curriculum.min_attempts",
        dest="min_attempts",
        type=int,
        default=1,
        help="ignore problems with fewer graded rollouts",
    )
    g.add_argument(
        "--curriculum.since_step", dest="since_step", type=int, default=0, help="use records from this step on"
    )
    g.add_argument(
        "--curriculum.merge",
        dest="merge",
        action="append",
        default=[],
        help="JSONL set to merge (repeatable; de-duplicated)",
    )
    g.add_argument(
        "--curriculum.skip",
        dest="skip",
        type=int,
        default=0,
        help="drop the first N rows of that order (a later stage's part)",
    )
    g.add_argument(
        "--curriculum.rows", dest="rows", type=int, help="write exactly N rows of that order (default: all of it)"
    )
    g.add_argument(
        "--curriculum.tokenizer",
        dest="tokenizer",
        help="tokenizer whose chat template the trainer applied (to match its hashes; default: none, prompts "
        "hashed as written)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "build":  # a bad template fails before anything is read; the report names it canonically
            name, text = resolve_template(args.template)
            args.template = text if name == "custom" else name
            length_prompts.check(args)
        return build(args) if args.command == "build" else curriculum(args)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        print(f"lead-recipes data {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
