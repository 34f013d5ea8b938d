"""`lead-recipes grade`: output = input rows + correct/status/extracted, in order, nothing lost, summary line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lead_recipes.grading import cli as grade_cli


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_output_rows_are_input_rows_plus_verdicts_in_order(tmp_path, shared_data, capsys):
    src = [json.loads(line) for line in (shared_data / "grader" / "qwen25math_cot100.jsonl").open()][:64]
    inp = _write(tmp_path / "in.jsonl", [json.dumps(r) for r in src])
    out = tmp_path / "out.jsonl"
    assert (
        grade_cli.main(
            ["--input", str(inp), "--output", str(out), "--grade.workers", "2", "--no-grade.progress_enable"]
        )
        == 0
    )
    rows = [json.loads(line) for line in out.open()]
    assert len(rows) == len(src)
    for r, s in zip(rows, src):
        assert {k: r[k] for k in s} == s
        assert isinstance(r["correct"], bool) and r["status"] in ("correct", "wrong", "no_answer", "timeout", "error")
    assert sum(r["correct"] == r["label"] for r in rows) >= 63
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("graded 64 rows") and "correct" in summary


def test_given_answer_rows_are_graded_without_response(tmp_path):
    inp = _write(
        tmp_path / "in.jsonl",
        [json.dumps({"answer": r"\frac12", "given_answer": "0.5"}), json.dumps({"answer": 3, "given_answer": "4"})],
    )
    out = tmp_path / "out.jsonl"
    assert grade_cli.main(["--input", str(inp), "--output", str(out), "--no-grade.progress_enable"]) == 0
    assert [json.loads(line)["status"] for line in out.open()] == ["correct", "wrong"]


def test_malformed_lines_are_kept_as_error_rows_and_exit_nonzero(tmp_path, capsys):
    inp = _write(
        tmp_path / "in.jsonl",
        [
            '{"answer": "1", "response": "\\\\boxed{1}"}',
            "{not json",
            "[1, 2]",
            '{"response": "no gold"}',
            '{"answer": "2", "given_answer": "2"}',
        ],
    )
    out = tmp_path / "out.jsonl"
    assert grade_cli.main(["--input", str(inp), "--output", str(out), "--no-grade.progress_enable"]) == 1
    rows = [json.loads(line) for line in out.open()]
    assert [r["status"] for r in rows] == ["correct", "error", "error", "error", "correct"]
    assert rows[1]["_raw"] == "{not json" and "invalid JSON" in rows[1]["error"]
    assert "line 2" in capsys.readouterr().err


def test_missing_input_file_is_a_usage_error(tmp_path):
    assert grade_cli.main(["--input", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.timeout(120)
def test_console_script_runs_the_subcommand(tmp_path):
    inp = _write(tmp_path / "in.jsonl", [json.dumps({"answer": "7", "response": "so \\boxed{7}"})])
    out = tmp_path / "out.jsonl"
    exe = Path(sys.executable).with_name("lead-recipes")
    proc = subprocess.run(
        [str(exe), "grade", "--input", str(inp), "--output", str(out)], capture_output=True, text=True, timeout=100
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["status"] == "correct"
    assert "graded 1 rows" in proc.stdout


def test_output_into_a_folder_that_does_not_exist_creates_it(tmp_path):
    inp = _write(tmp_path / "in.jsonl", [json.dumps({"answer": "2", "given_answer": "2"})])
    out = tmp_path / "new" / "deeper" / "out.jsonl"
    assert grade_cli.main(["--input", str(inp), "--output", str(out), "--no-grade.progress_enable"]) == 0
    assert json.loads(out.read_text())["status"] == "correct"


def test_output_under_a_file_is_one_error_line_and_exit_2(tmp_path, capsys):
    inp = _write(tmp_path / "in.jsonl", [json.dumps({"answer": "2", "given_answer": "2"})])
    (tmp_path / "afile").write_text("x")
    assert (
        grade_cli.main(
            ["--input", str(inp), "--output", str(tmp_path / "afile" / "out.jsonl"), "--no-grade.progress_enable"]
        )
        == 2
    )
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_progress_bar_total_is_the_input_line_count_and_it_ends_full(tmp_path, monkeypatch):
    import tqdm

    seen = {}

    class Bar(tqdm.tqdm):
        def close(self):
            seen.update(total=self.total, n=self.n)
            super().close()

    monkeypatch.setattr(tqdm, "tqdm", Bar)
    lines = [json.dumps({"answer": str(i), "given_answer": str(i)}) for i in range(5)]
    inp = _write(tmp_path / "in.jsonl", lines[:2] + ["", "   "] + lines[2:] + ["{bad"])  # 8 lines, 2 blank
    assert grade_cli.main(["--input", str(inp), "--output", str(tmp_path / "o.jsonl")]) == 1
    assert seen == {"total": 8, "n": 8}


def test_accuracy_is_over_graded_rows_and_malformed_lines_are_counted_apart(tmp_path, capsys):
    inp = _write(
        tmp_path / "in.jsonl",
        [
            json.dumps({"answer": "1", "given_answer": "1"}),
            json.dumps({"answer": "1", "given_answer": "2"}),
            "{bad",
            "[1]",
        ],
    )
    assert (
        grade_cli.main(["--input", str(inp), "--output", str(tmp_path / "o.jsonl"), "--no-grade.progress_enable"]) == 1
    )
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert "accuracy 0.5000" in summary and "malformed input lines 2" in summary
    assert "not in the accuracy" in summary and "error 0" in summary


@pytest.mark.parametrize("flags,bars", [([], 1), (["--grade.progress_enable"], 1), (["--no-grade.progress_enable"], 0)])
def test_the_progress_bar_is_on_by_default_and_off_with_its_no_flag(flags, bars, tmp_path, monkeypatch):
    import tqdm

    class Bar:
        def __init__(self, *a, **k):
            made.append(k)
            self.n = 0

        def update(self, k):
            self.n += k

        def close(self):
            pass

    made = []
    monkeypatch.setattr(tqdm, "tqdm", Bar)
    inp = _write(tmp_path / "in.jsonl", [json.dumps({"answer": "1", "given_answer": "1"})])
    assert grade_cli.main(["--input", str(inp), "--output", str(tmp_path / "o.jsonl"), *flags]) == 0
    assert len(made) == bars


def test_the_full_progress_bar_is_printed_once(tmp_path):
    """The 100% bar appears once, though the last batch's update prints it whenever that batch takes longer than
    tqdm's 0.1 s refresh interval and close() may too (TQDM_MININTERVAL=0 TQDM_MINITERS=1 makes every update print)."""
    inp = _write(tmp_path / "in.jsonl", [json.dumps({"answer": str(i), "given_answer": str(i)}) for i in range(3)])
    env = {**os.environ, "TQDM_MININTERVAL": "0", "TQDM_MINITERS": "1"}
    cmd = [sys.executable, "-m", "lead_recipes.cli", "grade", "--input", str(inp), "--output", str(tmp_path / "o")]
    err = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr
    assert err.replace("\r", "\n").count("3/3 [") == 1, err


@pytest.mark.parametrize(
    "rows, said",
    [
        ([{"answer": "1", "given_answer": "1"}], "graded given_answer (no extraction)"),
        ([{"answer": "1", "response": "\\boxed{1}"}], "graded response (extraction final_answer)"),
        (
            [{"answer": "1", "response": "\\boxed{1}"}, {"answer": "2", "given_answer": "2"}],
            "graded response 1 (extraction final_answer), given_answer 1",
        ),
    ],
)
def test_the_summary_names_the_extraction_only_for_responses(rows, said, tmp_path, capsys):
    """The summary names an extraction policy only for rows graded from a response: given_answer extracts nothing."""
    inp = _write(tmp_path / "in.jsonl", [json.dumps(r) for r in rows])
    assert grade_cli.main(["--input", str(inp), "--output", str(tmp_path / "o"), "--no-grade.progress_enable"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert said in summary and summary.count("extraction") == ("extraction" in said)


def test_a_null_answer_is_named_as_null_not_as_missing(tmp_path, capsys):
    inp = _write(tmp_path / "in.jsonl", ['{"answer": null, "given_answer": "3"}', '{"given_answer": "3"}'])
    assert grade_cli.main(["--input", str(inp), "--output", str(tmp_path / "o"), "--no-grade.progress_enable"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["lead-recipes grade: line 1: `answer` is null", "lead-recipes grade: line 2: no `answer` field"]


@pytest.mark.parametrize(
    "flags,status",
    [
        ([], "correct"),  # the row's problem states the nearest hundredth
        (["--no-grade.problem_precision_enable"], "wrong"),  # 0.3 writes one significant digit: no approximation
        (["--no-grade.problem_precision_enable", "--grade.rel_tol", "0.15"], "correct"),
    ],
)
def test_a_precision_stated_in_the_rows_problem_applies_and_the_flags_change_it(tmp_path, flags, status):
    row = {"problem": "What is 1/3 to the nearest tenth?", "answer": "\\frac13", "given_answer": "0.3"}
    inp = _write(tmp_path / "in.jsonl", [json.dumps(row)])
    out = tmp_path / "out.jsonl"
    assert grade_cli.main(["--input", str(inp), "--output", str(out), "--no-grade.progress_enable", *flags]) == 0
    assert json.loads(out.read_text())["status"] == status


def test_a_rel_tol_outside_0_1_is_a_usage_error(tmp_path, capsys):
    inp = _write(tmp_path / "in.jsonl", [json.dumps({"answer": "1", "given_answer": "1"})])
    with pytest.raises(SystemExit) as e:
        grade_cli.main(["--input", str(inp), "--output", str(tmp_path / "o.jsonl"), "--grade.rel_tol", "2"])
    assert e.value.code == 2 and "--grade.rel_tol" in capsys.readouterr().err
