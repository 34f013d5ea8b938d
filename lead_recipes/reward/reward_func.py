"""OpenRLHF reward function: pass this file's path as `--reward.remote_url`. It strips the prompt, grades the response
with the process's shared Grader under $LEAD_RECIPES_EXTRACTION (default `boxed`), the prompt as the problem text
(a precision it states applies), and returns rewards, scores and `REWARD_LOG_KEYS`; it never raises, never returns
None and does not use CUDA.
See docs/grading.md#the-openrlhf-reward-function---rewardremote_url-pathpy.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from lead_recipes.grading.labels import LabelError, gold_answer
from lead_recipes.grading.pool.grader import Grade, get_grader
from lead_recipes.reward.logs import REWARD_LOG_KEYS, error_logs, reward_extra_logs, reward_result


def response_text(query: Any, prompt: Any) -> str:
    """The response inside `query`: the text after `prompt` when `query` starts with it (OpenRLHF's query is the
    decoded prompt + response), else the whole query (verl and TRL hand over the response alone). Never a search
    for the prompt inside the query: a short prompt such as `2` occurs in the response `\\boxed{2}`."""
    q = query if isinstance(query, str) else ("" if query is None else str(query))
    p = prompt if isinstance(prompt, str) else ""
    return q[len(p) :] if p and q.startswith(p) else q


def safe_is_repetitive(text: str) -> bool:
    """`lead_recipes.grading.repetition.is_repetitive(text)`; a failure there must never cost the reward (→ False)."""
    try:
        from lead_recipes.grading.repetition import is_repetitive

        return bool(is_repetitive(text))
    except Exception:  # noqa: BLE001
        return False


_LOGGED: list[bool] = []


def _log_once(e: Exception) -> None:
    if isinstance(e, ValueError) and not _LOGGED:  # e.g. an unknown LEAD_RECIPES_EXTRACTION: say so once
        _LOGGED.append(True)
        logging.getLogger(__name__).error("lead_recipes reward function: %s", e)


def _submit(grader, label, text, prompt):
    """The grader's future for one sample, or None (graded `error`, a grading failure the guard counts) when the
    label is an object without its answer: never its string form, which would grade a silent `wrong`."""
    try:
        gold = gold_answer(label)
    except LabelError as e:
        _log_once(e)
        return None
    return grader.submit(gold, text, problem=prompt if isinstance(prompt, str) else None)


def grade_samples(
    queries: Sequence[Any], prompts: Sequence[Any] | None, labels: Sequence[Any] | None
) -> tuple[list[float], list[dict[str, float]]]:
    """Rewards and per-sample extra_logs for parallel lists; the list lengths follow `queries`. Never raises."""
    n = len(queries) if queries is not None else 0
    prompts = list(prompts) if prompts is not None else []
    labels = list(labels) if labels is not None else []
    texts = [response_text(queries[i], prompts[i] if i < len(prompts) else "") for i in range(n)]
    try:
        grader = get_grader()
        futures = [
            _submit(grader, labels[i] if i < len(labels) else None, texts[i], prompts[i] if i < len(prompts) else None)
            for i in range(n)
        ]
        grades = [f.result() if f is not None else Grade(False, "error", None, 0.0) for f in futures]
    except Exception as e:  # noqa: BLE001
        _log_once(e)
        grades = [Grade(False, "error", None, 0.0) for _ in range(n)]
    logs = [
        reward_extra_logs(g, safe_is_repetitive(t), labels[i] if i < len(labels) else None, queries[i], t)
        for i, (g, t) in enumerate(zip(grades, texts))
    ]
    return [1.0 if g.correct else 0.0 for g in grades], logs


def reward_func(queries, prompts, labels, **kwargs) -> dict:
    """OpenRLHF's reward hook (see module docstring)."""
    try:
        rewards, logs = grade_samples(queries, prompts, labels)
    except Exception:  # noqa: BLE001 - belt and braces: OpenRLHF turns an exception into reward=None
        n = len(queries) if isinstance(queries, (list, tuple)) else 1
        rewards = [0.0] * max(n, 1)
        logs = error_logs(len(rewards), labels, queries)
    return reward_result(rewards, {k: [d[k] for d in logs] for k in REWARD_LOG_KEYS})
