"""`lead-recipes grade`: output = input rows + correct/status/extracted, in order, nothing lost, summary line."""
from __future__ import annotations

import json
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
    assert grade_cli.main(["--input", str(inp), "--output", str(out), "--grade.workers", "2",
                           "--grade.progress_enable", "0"]) == 0
    rows = [json.loads(line) for line in out.open()]
    assert len(rows) == len(src)
    for r, s in zip(rows, src):
        assert {k: r[k] for k in s} == s
        assert isinstance(r["correct"], bool) and r["status"] in ("correct", "wrong", "no_answer", "timeout", "error")
    assert sum(r["correct"] == r["label"] for r in rows) >= 63
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("graded 64 rows") and "correct" in summary


def test_given_answer_rows_are_graded_without_response(tmp_path):
    inp = _write(tmp_path / "in.jsonl", [json.dumps({"answer": r"\frac12", "given_answer": "0.5"}),
                                         json.dumps({"answer": 3, "given_answer": "4"})])
    out = tmp_path / "out.jsonl"
    assert grade_cli.main(["--input", str(inp), "--output", str(out), "--grade.progress_enable", "0"]) == 0
    assert [json.loads(line)["status"] for line in out.open()] == ["correct", "wrong"]


def test_malformed_lines_are_kept_as_error_rows_and_exit_nonzero(tmp_path, capsys):
    inp = _write(tmp_path / "in.jsonl", ['{"answer": "1", "response": "\\\\boxed{1}"}', "{not json", "[1, 2]",
                                         '{"response": "no gold"}', '{"answer": "2", "given_answer": "2"}'])
    out = tmp_path / "out.jsonl"
    assert grade_cli.main(["--input", str(inp), "--output", str(out), "--grade.progress_enable", "0"]) == 1
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
    proc = subprocess.run([str(exe), "grade", "--input", str(inp), "--output", str(out)], capture_output=True,
                          text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["status"] == "correct"
    assert "graded 1 rows" in proc.stdout
