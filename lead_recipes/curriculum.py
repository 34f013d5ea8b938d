"""GRPO-LEAD's stage-2 curriculum (arXiv 2504.09696, Sec. 4.1 and 4.3): which stage-1 problems stayed hard, read
from the per-problem records the trainer appends to `recipe_problems.jsonl` (docs/training.md), and the seeded order
that splits the set over stages. Pure functions over rows and records; `lead-recipes data curriculum`
(lead_recipes.data) reads and writes the files. See docs/launch.md#lead-recipes-data.
"""

from __future__ import annotations

import hashlib
import random
from typing import Iterable


def prompt_sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def problem_accuracy(records: Iterable[dict], since_step: int = 0) -> dict[str, dict]:
    """Aggregate the per-problem training records (recipe_problems.jsonl rows) per problem:
    {key: {"correct", "total", "accuracy"}} keyed by prompt_sha1 (and by "problem" as well, when it differs), over
    steps >= since_step."""
    acc: dict[str, dict] = {}
    for i, rec in enumerate(records):
        try:
            step, correct, total = int(rec["step"]), int(rec["correct"]), int(rec["total"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"record {i}: needs integer step/correct/total, got {rec}") from None
        if step < since_step or total <= 0:
            continue
        if not 0 <= correct <= total:
            raise ValueError(f"record {i}: correct={correct} outside [0, total={total}]")
        keys = {str(rec.get("prompt_sha1") or ""), str(rec.get("problem") or "")} - {""}
        if not keys:
            raise ValueError(f"record {i}: neither prompt_sha1 nor problem is set")
        entry = {"correct": 0, "total": 0}
        for key in keys:
            entry = acc.setdefault(key, entry)
        for key in keys:
            acc[key] = entry
        entry["correct"] += correct
        entry["total"] += total
    for entry in acc.values():
        entry["accuracy"] = entry["correct"] / entry["total"]
    return acc


def row_keys(row: dict, chat_template=None) -> list[str]:
    """The keys a trainer record (lead_recipes.training.step_stats) may carry for this dataset row: the sha1 (and its
    16-hex "problem" prefix) of the prompt as written and, with a tokenizer, as OpenRLHF renders it through the
    chat template; and the row id. Labels are never used: many problems share an answer."""
    prompt = row.get("prompt")
    texts = [prompt] if isinstance(prompt, str) else []
    if chat_template is not None and prompt is not None:
        chat = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        texts.append(chat_template(chat, tokenize=False, add_generation_prompt=True))
    keys = []
    for text in texts:
        sha = prompt_sha1(text)
        keys += [sha, sha[:16]]
    return keys + ([str(row["id"])] if row.get("id") is not None else [])


def hard_problems(
    dataset: list[dict], acc: dict[str, dict], threshold: float, min_attempts: int, chat_template=None
) -> tuple[list[dict], int, list[dict]]:
    """(rows whose problem has >= min_attempts graded rollouts and accuracy <= threshold, how many rows matched a
    record at all, one report entry per picked row)."""
    picked, matched, report = [], 0, []
    for row in dataset:
        hit = next((acc[k] for k in row_keys(row, chat_template) if k in acc), None)
        if hit is None:
            continue
        matched += 1
        if hit["total"] >= min_attempts and hit["accuracy"] <= threshold:
            picked.append(row)
            report.append({"id": row.get("id"), "accuracy": hit["accuracy"], "total": hit["total"]})
    return picked, matched, report


def seeded_rows(rows: list[dict], seed: int, skip: int = 0, n: int | None = None) -> list[dict]:
    """Rows skip .. skip+n (n default: len(rows)) of a seeded stream of reshuffled passes over `rows`. Two stages with
    the same seed continue one order (GRPO-LEAD stage 2a/2b: 100 + 140 steps of 32 prompts)."""
    rng, stream = random.Random(seed), []
    while rows and len(stream) < skip + (n or len(rows)):
        order = list(rows)
        rng.shuffle(order)
        stream += order
    return stream[skip : skip + (n or len(rows))]
