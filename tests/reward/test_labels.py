"""An object label (`{"id": ..., "answer": ...}`, the documented form) is graded by its `answer` wherever a label is
graded: the reward function as OpenRLHF loads it, `lead-recipes grade`; one without `answer` is a grading failure
(`error`, counted by the guard), never a silent `wrong`, and the preflight refuses it in one line. The server's side
is in test_server.py (a real port)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lead_recipes.grading import cli as grade_cli
from lead_recipes.grading.labels import LabelError, gold_answer
from lead_recipes.training.data_check import check_data

PROMPT = "<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n"


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


def test_a_null_label_is_a_grading_error_whose_reason_says_null(executor):
    out = _reward(executor, None)
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["status_error"] == 1.0
    with pytest.raises(LabelError, match="the label is null"):
        gold_answer(None)


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
    check = check_data("data", str(data), "prompt", "label", "train")
    assert not check.ok, check
    assert "\n" not in check.detail and "2 row(s)" in check.detail and "row 2" in check.detail
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in rows[:1]) + json.dumps({"prompt": "q", "label": "3"}) + "\n")
    assert check_data("data", str(good), "prompt", "label", "train").ok


BAD_ROWS = [{"prompt": "q1", "label": {"id": "a", "answer": "1"}}, {"prompt": "q2", "label": {"id": "b"}}]


def _write(form: str, path: Path, rows: list[dict]) -> str:
    """`rows` as a dataset of the given form, each as OpenRLHF's blending_datasets can read it."""
    import datasets

    if form == "jsonl":
        path = path.with_suffix(".jsonl")
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif form == "json array":
        path = path.with_suffix(".json")
        path.write_text(json.dumps(rows))
    elif form == "parquet":
        path = path.with_suffix(".parquet")
        datasets.Dataset.from_list(rows).to_parquet(str(path))
    elif form == "save_to_disk":
        datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(path))
    elif form == "directory of files":
        path.mkdir()
        (path / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("form", ["jsonl", "json array", "parquet", "save_to_disk", "directory of files"])
def test_preflight_reads_labels_in_every_local_dataset_form_openrlhf_loads(tmp_path, form):
    bad = check_data("data", _write(form, tmp_path / "bad", BAD_ROWS), "prompt", "label", "train")
    assert not bad.ok and "1 row(s)" in bad.detail and "row 2" in bad.detail and "'answer'" in bad.detail, bad
    good = check_data("data", _write(form, tmp_path / "good", BAD_ROWS[:1]), "prompt", "label", "train")
    assert good.ok, good
    missing = check_data("data", _write(form, tmp_path / "keys", BAD_ROWS), "problem", "label", "train")
    assert not missing.ok and "['problem']" in missing.detail, missing


def test_preflight_refuses_an_object_label_whose_answer_is_null(tmp_path):
    rows = [{"prompt": "q1", "label": {"id": "a", "answer": None}}]
    check = check_data("data", _write("jsonl", tmp_path / "d", rows), "prompt", "label", "train")
    assert not check.ok and "null" in check.detail, check


def test_preflight_refuses_a_null_label(tmp_path):
    rows = [{"prompt": "q1", "label": "1"}, {"prompt": "q2", "label": None}]
    check = check_data("data", _write("jsonl", tmp_path / "d", rows), "prompt", "label", "train")
    assert not check.ok and "row 2" in check.detail and "the label is null" in check.detail, check


def test_preflight_says_what_it_cannot_check_a_dataset_script_is_not_run(tmp_path):
    script = tmp_path / "mydata.py"
    script.write_text("raise SystemExit('a dataset script must not run in the preflight')\n")
    check = check_data("data", str(script), "prompt", "label", "train")
    assert check.ok and "not checked" in check.detail and "script" in check.detail, check


def test_preflight_refuses_data_without_l1_targets_for_an_l1_method(tmp_path):
    """An L1 method on prompts without n_gold is refused in the preflight, not after Ray, the models and a whole
    generated step, where the method's "needs a target length per prompt" would stop the run."""
    plain = _write("jsonl", tmp_path / "plain", [{"prompt": "q1", "label": "1"}, {"prompt": "q2", "label": "2"}])
    for method in ("l1-exact", "l1-max"):
        check = check_data("data", plain, "prompt", "label", "train", method=method)
        assert not check.ok and "2 row(s)" in check.detail and "n_gold" in check.detail, check
        assert f"--recipe.method {method}" in check.detail and "data build --l1.mode" in check.detail, check
    assert check_data("data", plain, "prompt", "label", "train", method="grpo").ok
    l1 = [{"prompt": "q1 Think for 300 tokens.", "label": {"answer": "1", "n_gold": 300, "l1_mode": "exact"}}]
    assert check_data("data", _write("jsonl", tmp_path / "l1", l1), "prompt", "label", "train", method="l1-exact").ok


def test_the_train_preflight_checks_the_prompt_data_for_the_runs_method(tmp_path):
    from types import SimpleNamespace as NS

    from lead_recipes.methods.config import RecipeConfig
    from lead_recipes.training import preflight

    plain = _write("jsonl", tmp_path / "plain", [{"prompt": "q1", "label": "1"}])
    data = NS(prompt_dataset=plain, input_key="prompt", label_key="label", prompt_split="train")
    skip = tuple(n for n in preflight.CHECK_NAMES if n != "data")
    for method, ok in (("l1-exact", False), ("lead", True)):
        args = NS(data=data, recipe=RecipeConfig(method=method))
        (check,) = [c for c in preflight.run_preflight(args, skip=skip) if c.name == "data"]
        assert check.ok is ok, check
