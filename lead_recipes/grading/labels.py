"""The gold answer inside a training label: the label itself, or an object's `"answer"` (an object without one, or
with a null one, is a LabelError). Every grading entry point reads the gold through `gold_answer`, so an object is
never graded as its string form. See docs/grading.md#the-openrlhf-reward-function---rewardremote_url-pathpy.
"""

from __future__ import annotations

from typing import Any

ANSWER_KEY = "answer"


class LabelError(ValueError):
    """An object label without the documented answer key."""


def gold_answer(label: Any) -> Any:
    """The gold answer of `label`: `label["answer"]` for an object label, else the label itself."""
    problem = label_problem(label)
    if problem:
        raise LabelError(problem)
    return label[ANSWER_KEY] if isinstance(label, dict) else label


def label_problem(label: Any) -> str | None:
    """Why `label` cannot be graded (one line), or None when it can. A null answer is as missing: `datasets` fills
    a key other rows' labels have with null."""
    if isinstance(label, dict) and label.get(ANSWER_KEY) is None:
        keys = ", ".join(sorted(map(str, label))[:8]) or "none"
        what = f"its {ANSWER_KEY!r} is null" if ANSWER_KEY in label else f"this one has keys: {keys}"
        return (
            f'an object label needs its gold answer under {ANSWER_KEY!r} (e.g. {{"id": "a", "answer": "42"}}); {what}'
        )
    return None
