"""The gold answer inside a training label: the one place that knows what an object label looks like.

A label is the gold answer itself (a string or number, graded as is) or a JSON object carrying it under `"answer"`
(docs/training.md: `{"id": "a", "answer": "42"}`; its `id` names the problem in recipe_problems.jsonl). Every grading
entry point reads the gold through `gold_answer`: the reward function, `lead-recipes serve`, `lead-recipes grade`,
and the preflight's data check (`label_problem`), so an object is never graded as its string form.

What it does not do: grade, or accept an object without `"answer"`: that is a LabelError naming the keys it has.
"""
from __future__ import annotations

from typing import Any

ANSWER_KEY = "answer"


class LabelError(ValueError):
    """An object label without the documented answer key."""


def gold_answer(label: Any) -> Any:
    """The gold answer of `label`: `label["answer"]` for an object label, else the label itself."""
    if isinstance(label, dict):
        if ANSWER_KEY not in label:
            raise LabelError(label_problem(label))
        return label[ANSWER_KEY]
    return label


def label_problem(label: Any) -> str | None:
    """Why `label` cannot be graded (one line), or None when it can."""
    if isinstance(label, dict) and ANSWER_KEY not in label:
        keys = ", ".join(sorted(map(str, label))[:8]) or "none"
        return (f"an object label needs its gold answer under {ANSWER_KEY!r} (e.g. {{\"id\": \"a\", \"answer\": \"42\"}}); "
                f"this one has keys: {keys}")
    return None
