"""Clients of `lead-recipes serve` for other frameworks: a TRL `reward_funcs` callable (`TRLReward`) and verl custom
reward functions (`verl_compute_score`, `verl_compute_score_batch`). Each sends the responses alone as `responses`,
through `remote_reward.fetch` (fail-over and backoff over $LEAD_RECIPES_REWARD_URLS), and raises when no server
grades: another framework would train on a silent 0. See docs/own-data.md#the-reward-server-from-verl-or-trl.
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from lead_recipes.reward.remote_reward import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_WAIT_S,
    TIMEOUT_ENV,
    URLS_ENV,
    WAIT_ENV,
    fetch,
    server_urls,
)


def _text(item: Any) -> str:
    """A plain string, or a conversational turn list's last message content (TRL's conversational format)."""
    if isinstance(item, list) and item and isinstance(item[-1], dict):
        return str(item[-1].get("content", ""))
    return item if isinstance(item, str) else ("" if item is None else str(item))


def grade_remote(
    responses: Sequence[Any], labels: Sequence[Any], prompts: Sequence[Any] | None = None, urls: Sequence[str] = ()
) -> dict:
    """`{"rewards": [float], "extra_logs": {key: [float]}}` from the first server that answers; raises
    `remote_reward.Refused` or `TimeoutError` naming the last server's reason."""
    urls = list(urls) or server_urls()
    if not urls:
        raise ValueError(f"no reward server: set ${URLS_ENV} (e.g. http://127.0.0.1:5000/get_reward) or pass urls")
    n = len(responses)
    if len(labels) != n:
        raise ValueError(f"{len(labels)} labels for {n} responses")
    body = {"responses": [_text(r) for r in responses], "labels": list(labels)}
    if prompts is not None:  # the problem text: a precision it states applies
        body["prompts"] = [_text(p) for p in prompts]
    wait_s = float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_S))
    timeout = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    return fetch(urls, json.dumps(body).encode(), n, wait_s, timeout)


class TRLReward:
    """A TRL `GRPOTrainer(reward_funcs=[TRLReward()])` callable: TRL calls it with `prompts`, `completions` and each
    dataset column as a keyword list; the gold answer is the `label_key` column. Picklable (a class, not a closure),
    and named for TRL's logs."""

    def __init__(self, label_key: str = "answer", urls: Sequence[str] = ()):
        self.label_key, self.urls = label_key, tuple(urls)
        self.__name__ = "lead_recipes_correct"

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
        if self.label_key not in columns:
            # the dataset's columns are lists; TRL adds completion_ids and non-list helpers (trainer_state, log_metric)
            have = ", ".join(sorted(k for k, v in columns.items() if isinstance(v, list) and k != "completion_ids"))
            raise KeyError(
                f"TRLReward: no dataset column {self.label_key!r} (columns: {have or 'none'}); pass "
                "TRLReward(label_key=...)"
            )
        return grade_remote(completions, columns[self.label_key], prompts, self.urls)["rewards"]


def verl_compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kw) -> dict:
    """verl's `custom_reward_function` (per sample): `{"score": reward, **extra_logs}`. The problem text, when
    `extra_info` holds a `question`, goes along for a precision it states."""
    out = verl_compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kw)
    return out[0]


def verl_compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    urls: Sequence[str] = (),
    **kw: Any,
) -> list[dict]:
    """verl's batch reward manager form: one request for the whole batch."""
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    questions = [i.get("question") if isinstance(i, dict) else None for i in infos]
    out = grade_remote(solution_strs, ground_truths, questions if any(questions) else None, urls)
    logs = out["extra_logs"]
    return [{"score": r, **{k: v[i] for k, v in logs.items()}} for i, r in enumerate(out["rewards"])]
