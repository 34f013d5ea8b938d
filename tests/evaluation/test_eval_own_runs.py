"""Generations from another tool through `lead-recipes eval` (issue 36): replay rows without `sample` numbered in file
order, other column names through `--replay.field_map`, no preset or default n recorded that the user did not give,
`eval compare` listing a base that is also a run once, and AES only between runs that measure the same thing."""

from __future__ import annotations

import json

import pytest

from evaluation import cli, metrics
from lead_recipes.benchmarks import load_benchmark


def generations(path, shared_data, n=3, k=2, benches=("aime2024", "math500"), columns=None, numbered=True):
    """k problems per benchmark, n rows each; the first row boxes the gold answer. `columns` renames the fields."""
    names = {"benchmark": "benchmark", "id": "id", "sample": "sample", "response": "response", **(columns or {})}
    rows = []
    for b in benches:
        for p in load_benchmark(b, shared_data / "benchmarks")[:k]:
            for s in range(n):
                row = {
                    names["benchmark"]: b,
                    names["id"]: p.id,
                    names["response"]: f"So \\boxed{{{p.answer if s == 0 else '123456789'}}}.",
                    "num_tokens": 10 + s,
                }
                if numbered:
                    row[names["sample"]] = s
                rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def evaluate(replay, out, shared_data, *more) -> dict:
    argv = ["--eval.backend", "replay", "--replay.path", str(replay), "--data.benchmarks_dir"]
    argv += [str(shared_data / "benchmarks"), "--limit", "2", "--output", str(out), "--no-eval.progress_enable"]
    assert cli.main([*argv, "--no-eval.plots_enable", *more]) == 0
    return json.loads((out / "summary.json").read_text())


def test_rows_without_sample_are_numbered_in_file_order(shared_data, tmp_path):
    summary = evaluate(generations(tmp_path / "g.jsonl", shared_data, n=4, numbered=False), tmp_path / "r", shared_data)
    m = summary["benchmarks"]["aime2024"]
    assert m["n_samples"] == 4 and m["accuracy"] == pytest.approx(0.25)  # sample 0, the right one, of 4


def test_the_replay_field_map_reads_another_tools_column_names(shared_data, tmp_path):
    columns = {"id": "problem_id", "response": "output", "sample": "k"}
    path = generations(tmp_path / "g.jsonl", shared_data, columns=columns)
    summary = evaluate(
        path, tmp_path / "r", shared_data, "--replay.field_map", "id=problem_id,response=output,sample=k"
    )
    assert summary["benchmarks"]["math500"]["accuracy"] == pytest.approx(1 / 3)


def test_a_row_missing_a_column_names_the_mapped_column_and_the_flag(shared_data, tmp_path, capsys):
    path = generations(tmp_path / "g.jsonl", shared_data, columns={"response": "output"})
    argv = ["--eval.backend", "replay", "--replay.path", str(path), "--output", str(tmp_path / "r")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "needs benchmark, id, response" in err and "--replay.field_map" in err


def test_a_replay_records_no_preset_or_default_n_it_was_not_given(shared_data, tmp_path):
    generation = evaluate(generations(tmp_path / "g.jsonl", shared_data, n=8), tmp_path / "r", shared_data)["config"][
        "generation"
    ]
    assert generation["preset"] == "unknown" and "preset" in generation["unknown"]
    assert generation["n_default"] is None and generation["n_per_benchmark"] == {"aime2024": 8, "math500": 8}
    report = (tmp_path / "r" / "report.md").read_text()
    assert "Preset `unknown`" in report and "sober" not in report.split("## ")[0]


def test_a_preset_given_to_a_replay_is_recorded(shared_data, tmp_path):
    path = generations(tmp_path / "g.jsonl", shared_data)
    summary = evaluate(path, tmp_path / "r", shared_data, "--eval.preset", "grpo-lead-7b")
    assert summary["config"]["generation"]["preset"] == "grpo-lead-7b"


def test_compare_lists_a_base_that_is_also_a_run_once(shared_data, tmp_path, capsys):
    path = generations(tmp_path / "g.jsonl", shared_data)
    evaluate(path, tmp_path / "a", shared_data)
    evaluate(path, tmp_path / "b", shared_data)
    capsys.readouterr()
    argv = ["compare", str(tmp_path / "a"), str(tmp_path / "b" / "summary.json"), "--eval.base", str(tmp_path / "b")]
    assert cli.main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "run" not in line]
    assert len(rows) == 2 and sum("(base)" in r for r in rows) == 1 and not any("(base) (base)" in r for r in rows)


def summary(accuracy, length, n, problems=30, benches=("aime2024",)):
    per = {b: {"accuracy": accuracy, "mean_length": length, "n_samples": n, "n_problems": problems} for b in benches}
    return {"benchmarks": per, "average": {"accuracy": accuracy, "mean_length": length}}


def test_aes_is_refused_between_runs_with_a_different_n_naming_both():
    rep = metrics.aes_report(summary(0.5, 100, n=8), summary(0.5, 200, n=3))
    assert rep["overall"]["aes"] is None and rep["per_benchmark"]["aime2024"]["aes"] is None
    assert "samples per problem differ (model 8 vs base 3)" in rep["overall"]["reason"]


def test_aes_is_refused_between_runs_over_different_benchmark_sets_but_kept_per_shared_benchmark():
    rep = metrics.aes_report(summary(0.5, 100, 4, benches=("aime2024", "math500")), summary(0.5, 200, 4))
    assert rep["overall"]["aes"] is None and "different benchmarks" in rep["overall"]["reason"]
    assert rep["per_benchmark"]["aime2024"]["aes"] == pytest.approx(0.5)


def test_aes_between_like_runs_is_computed():
    assert metrics.aes_report(summary(0.5, 100, 4), summary(0.5, 200, 4))["overall"]["aes"] == pytest.approx(0.5)
