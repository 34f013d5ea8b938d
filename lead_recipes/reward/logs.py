"""What every reward entry point returns to OpenRLHF: the per-sample `extra_logs` (`REWARD_LOG_KEYS`,
`reward_extra_logs`) and the rewards and scores as a float vector (`as_float_vector`).
See docs/training.md#logged-per-step-wb--tensorboard-train."""

from __future__ import annotations

from typing import Any

from lead_recipes.grading.labels import length_target
from lead_recipes.grading.pool.grader import STATUSES, Grade

REWARD_LOG_KEYS = (
    "correct",
    "repetitive",
    "status_correct",
    "status_wrong",
    "status_no_answer",
    "status_timeout",
    "status_error",
    "grade_latency_s",
    "n_gold",  # L1's per-prompt target from the label (0 = none); the plug-in's RolloutBatch.n_gold
    "l1_max",  # 1 = the prompt asks for at most n_gold tokens; RolloutBatch.l1_max
)


def reward_extra_logs(grade: Grade, repetitive: bool, label: Any = None) -> dict[str, float]:
    """`extra_logs` for one sample: exactly REWARD_LOG_KEYS, in order, plain floats (status one-hot); the L1 target
    is echoed from `label` whatever the grade, so a failed grade never drops it."""
    logs = {"correct": 1.0 if grade.correct else 0.0, "repetitive": 1.0 if repetitive else 0.0}
    for s in STATUSES:
        logs[f"status_{s}"] = 1.0 if grade.status == s else 0.0
    logs["grade_latency_s"] = float(grade.latency_s) if grade.latency_s == grade.latency_s else 0.0
    logs["n_gold"], logs["l1_max"] = length_target(label)
    return logs


def as_float_vector(values: list[float]):
    """`values` as a float32 tensor, for OpenRLHF's `rewards` and `scores`."""
    try:
        import torch

        return torch.tensor(values, dtype=torch.float32)
    except ImportError:  # base install without torch (e.g. a grading-only box): plain lists work for OpenRLHF too
        return list(values)
