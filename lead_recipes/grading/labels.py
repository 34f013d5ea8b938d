"""The gold answer inside a training label: the label itself, or an object's `"answer"` (a null label, or an object
without an answer or with a null one, is a LabelError). Every grading entry point reads the gold through
`gold_answer`, so an object is never graded as its string form. An object may also carry L1's target (`"n_gold"`,
`"l1_mode"`), which `length_target` reads for the reward function to echo. See
docs/grading.md#the-openrlhf-reward-function---rewardremote_url-pathpy.
"""

from __future__ import annotations

import math
from typing import Any

from lead_recipes.prompts import L1_MODES

ANSWER_KEY = "answer"
L1_KEYS = ("n_gold", "l1_mode")


class LabelError(ValueError):
    """An object label without the documented answer key."""


def gold_answer(label: Any) -> Any:
    """The gold answer of `label`: `label["answer"]` for an object label, else the label itself."""
    problem = label_problem(label)
    if problem:
        raise LabelError(problem)
    return label[ANSWER_KEY] if isinstance(label, dict) else label


def label_problem(label: Any) -> str | None:
    """Why `label` cannot be graded (one line), or None when it can. A null label, or an object's null answer, is
    as missing (`datasets` fills a key other rows' labels have with null)."""
    if label is None:
        return f'the label is null; send the gold answer (e.g. "42") or an object holding it under {ANSWER_KEY!r}'
    if isinstance(label, dict) and label.get(ANSWER_KEY) is None:
        keys = ", ".join(sorted(map(str, label))[:8]) or "none"
        what = f"its {ANSWER_KEY!r} is null" if ANSWER_KEY in label else f"this one has keys: {keys}"
        return (
            f'an object label needs its gold answer under {ANSWER_KEY!r} (e.g. {{"id": "a", "answer": "42"}}); {what}'
        )
    if isinstance(label, dict) and any(k in label for k in L1_KEYS):
        n, mode = label.get("n_gold"), label.get("l1_mode")
        if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n <= 0:
            return f"an L1 label's n_gold must be a positive token count, got {n!r}"
        if mode not in L1_MODES:
            return f"an L1 label's l1_mode must be one of {', '.join(L1_MODES)}, got {mode!r}"
    return None


def length_target(label: Any) -> tuple[float, float]:
    """(n_gold, 1.0 for an L1-Max "maximum N tokens" prompt else 0.0) of a valid L1 label; (0.0, 0.0) for any other
    label (no target)."""
    if not isinstance(label, dict) or "n_gold" not in label or label_problem(label):
        return 0.0, 0.0
    return float(label["n_gold"]), float(label["l1_mode"] == "max")
