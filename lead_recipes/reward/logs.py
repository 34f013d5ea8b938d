"""What every reward entry point returns to OpenRLHF: the per-sample `extra_logs` (`REWARD_LOG_KEYS`,
`reward_extra_logs`, `error_logs`) and the whole return value (`reward_result`).
See docs/training.md#logged-per-step-wb--tensorboard-train."""

from __future__ import annotations

import re
from typing import Any

from lead_recipes.grading.labels import length_target
from lead_recipes.grading.pool.grader import STATUSES, Grade

REWARD_LOG_KEYS = (
    "correct",
    "repetitive",
    "think_boxed",  # GRPO-LEAD code's format rule on prompt + response (`think_boxed`); RolloutBatch.think_boxed
    "answer_boxed",  # Laser code's format rule on prompt + response (`answer_boxed`); RolloutBatch.answer_boxed
    "think_once",  # AdaptThink code's count rule on the response alone (`think_once`); RolloutBatch.think_once
    "status_correct",
    "status_wrong",
    "status_no_answer",
    "status_timeout",
    "status_error",
    "grade_latency_s",
    "n_gold",  # L1's per-prompt target from the label (0 = none); the plug-in's RolloutBatch.n_gold
    "l1_max",  # 1 = the prompt asks for at most n_gold tokens; RolloutBatch.l1_max
)


def think_boxed(text: Any) -> bool:
    """GRPO-LEAD's format rule (aeroplanepaper/GRPO-LEAD `math_reward.py` `RewardMathFn.__call__`) on the decoded
    prompt + response: the text has a `</think>`, and the last `\\boxed` before its first one parses as DeepScaleR's
    `extract_answer` parses it (`\\boxed{` with its braces closed). Its negation is the code's format failure."""
    if not isinstance(text, str) or "</think>" not in text:
        return False
    head = text.split("</think>", 1)[0]
    start = head.rfind("\\boxed")
    if start < 0 or not head.startswith("\\boxed{", start):
        return False
    # DeepScaleR's last_boxed_only_string: the box ends at the first `}` that brings the open count back to 0
    depth = 0
    for ch in head[start:]:
        depth += (ch == "{") - (ch == "}")
        if ch == "}" and depth == 0:
            return True
    return False


# Laser's extract_last_boxed: a \boxed{...} with up to two levels of nested braces
_LASER_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")


def answer_boxed(text: Any) -> bool:
    """Laser's format rule (hkust-nlp/Laser `hf_math_verifier.py::compute_score`) on the decoded prompt + response:
    the text has `<think>` and `</think>`, and a complete `\\boxed{...}` between the first `</think>` and the next."""
    if not isinstance(text, str) or "<think>" not in text or "</think>" not in text:
        return False
    return _LASER_BOXED.search(text.split("</think>")[1]) is not None


def think_once(response: Any) -> bool:
    """AdaptThink's count rule (THU-KEG/AdaptThink `adapt_think_rm.py` L523-557) on the response alone, its forced
    first token included: no `<think>`, exactly one `</think>`, and a `\\boxed` after it (the answer the code
    grades). Its negation scores acc = 0 whatever the answer."""
    if not isinstance(response, str) or "<think>" in response or response.count("</think>") != 1:
        return False
    return "\\boxed" in response.split("</think>", 1)[1]


def reward_extra_logs(
    grade: Grade, repetitive: bool, label: Any = None, text: Any = None, response: Any = None
) -> dict[str, float]:
    """`extra_logs` for one sample: exactly REWARD_LOG_KEYS, in order, plain floats (status one-hot); the format
    flags are read from `text`, the sample's prompt + response, and from `response` alone (None: no text, 0); the L1
    target is echoed from `label` whatever the grade, so a failed grade never drops it."""
    logs = {
        "correct": 1.0 if grade.correct else 0.0,
        "repetitive": 1.0 if repetitive else 0.0,
        "think_boxed": 1.0 if think_boxed(text) else 0.0,
        "answer_boxed": 1.0 if answer_boxed(text) else 0.0,
        "think_once": 1.0 if think_once(response) else 0.0,
    }
    for s in STATUSES:
        logs[f"status_{s}"] = 1.0 if grade.status == s else 0.0
    logs["grade_latency_s"] = float(grade.latency_s) if grade.latency_s == grade.latency_s else 0.0
    logs["n_gold"], logs["l1_max"] = length_target(label)
    return logs


def error_logs(n: int, labels: Any, queries: Any = None) -> list[dict[str, float]]:
    """`extra_logs` of `n` samples all graded `error`, each L1 target still echoed from its label and the format
    flags still read from its query (prompt + response): they need no grader, and zeroing them in an outage would
    score every rollout a format failure (Laser: −1)."""
    labels = list(labels) if isinstance(labels, (list, tuple)) else []
    queries = list(queries) if isinstance(queries, (list, tuple)) else []
    error = Grade(False, "error", None, 0.0)
    return [
        reward_extra_logs(
            error, False, labels[i] if i < len(labels) else None, queries[i] if i < len(queries) else None
        )
        for i in range(n)
    ]


def reward_result(rewards: list[float], extra_logs: dict[str, list[float]]) -> dict:
    """What a reward function returns to OpenRLHF: `rewards` = `scores` as a float32 tensor and `extra_logs`, one
    list per REWARD_LOG_KEYS key (for a single sample, its bare values, as OpenRLHF's per-sample calls expect)."""
    if len(rewards) == 1:
        extra_logs = {k: v[0] for k, v in extra_logs.items()}
    return {"rewards": _float_vector(rewards), "scores": _float_vector(rewards), "extra_logs": extra_logs}


def _float_vector(values: list[float]):
    try:
        import torch

        return torch.tensor(values, dtype=torch.float32)
    except ImportError:  # base install without torch (e.g. a grading-only box): plain lists work for OpenRLHF too
        return list(values)
