"""An object label (`{"id": ..., "answer": ...}`, the documented form) is graded by its `answer` wherever a label is
graded: the reward function as OpenRLHF loads it, `lead-recipes grade`; one without `answer` is a grading failure
(`error`, counted by the guard), never a silent `wrong`, and the preflight refuses it in one line. The server's side
is in test_server.py (a real port)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import lead_recipes.grading.reward_func as rf_module
from lead_recipes.grading import cli as grade_cli
from lead_recipes.grading.labels import LabelError, gold_answer
from lead_recipes.training.preflight import _check_data

PROMPT = "<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def executor():
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    return SingleTurnAgentExecutor(str(Path(rf_module.__file__)))


def _reward(executor, label, response="The answer is \\boxed{42}."):
    return asyncio.run(executor._fetch_rewards_via_func([PROMPT + response], [PROMPT], [label]))[0]


def test_an_object_label_is_graded_by_its_answer_in_the_reward_function(executor):
    out = _reward(executor, {"id": "a", "answer": "42"})
    assert out["rewards"].tolist() == [1.0] and out["extra_logs"]["status_correct"] == 1.0
    wrong = _reward(executor, {"id": "a", "answer": "41"})
    assert wrong["rewards"].tolist() == [0.0] and wrong["extra_logs"]["status_wrong"] == 1.0


def test_an_object_label_without_answer_is_a_grading_error_not_a_wrong_answer(executor):
    out = _reward(executor, {"id": "a", "gold": "42"})
    assert out["rewards"].tolist() == [0.0]
    assert out["extra_logs"]["status_error"] == 1.0 and out["extra_logs"]["status_wrong"] == 0.0


def test_gold_answer_names_the_missing_key_and_leaves_plain_labels_alone():
    assert gold_answer("42") == "42" and gold_answer(7) == 7 and gold_answer({"answer": "x", "id": 1}) == "x"
    with pytest.raises(LabelError, match=r"'answer'.*keys: gold, id"):
        gold_answer({"id": "a", "gold": "42"})


def test_grade_cli_reads_an_object_answer_and_reports_one_without_its_key(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        json.dumps({"answer": {"id": "a", "answer": "42"}, "response": "\\boxed{42}"})
        + "\n"
        + json.dumps({"answer": {"id": "b"}, "response": "\\boxed{42}"})
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert (
        grade_cli.main(
            ["--input", str(inp), "--output", str(out), "--grade.workers", "1", "--no-grade.progress_enable"]
        )
        == 1
    )  # the malformed row makes the exit code 1
    rows = [json.loads(line) for line in out.open()]
    assert rows[0]["status"] == "correct" and rows[0]["correct"] is True
    assert rows[1]["status"] == "error" and "'answer'" in rows[1]["error"]


def test_preflight_refuses_object_labels_without_answer_in_one_line_naming_the_row(tmp_path):
    data = tmp_path / "prompts.jsonl"
    rows = [
        {"prompt": "q1", "label": {"id": "a", "answer": "1"}},
        {"prompt": "q2", "label": {"id": "b"}},
        {"prompt": "q3", "label": {"id": "c"}},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    check = _check_data("data", str(data), "prompt", "label")
    assert not check.ok, check
    assert "\n" not in check.detail and "2 row(s)" in check.detail and "line 2" in check.detail
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in rows[:1]) + json.dumps({"prompt": "q", "label": "3"}) + "\n")
    assert _check_data("data", str(good), "prompt", "label").ok
