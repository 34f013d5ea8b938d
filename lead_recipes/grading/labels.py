"""The gold answer inside a training label: the label itself, or an object's `"answer"` (an object without one is a
LabelError). Every grading entry point reads the gold through `gold_answer`, so an object is never graded as its
string form. See docs/grading.md#the-openrlhf-reward-function---rewardremote_url-pathpy.
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
        return (
            f'an object label needs its gold answer under {ANSWER_KEY!r} (e.g. {{"id": "a", "answer": "42"}}); '
            f"this one has keys: {keys}"
        )
    return None
