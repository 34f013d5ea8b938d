"""The eval plots a skeptical reader trusts (issue 36): error bars on the accuracy-vs-length frontier, an accuracy
axis from 0 in run.png, no "truncated" legend when truncation is unknown, one benchmark's budget line not hidden
under its average, and a distinct colour and marker per configuration. Each drawn for real (matplotlib, Agg) and
read back from the figure."""

from __future__ import annotations

import math

import pytest

from evaluation import plots


def summary(acc, length, se, benches=("aime2024", "math500")):
    per = {
        b: {"accuracy": acc, "accuracy_stderr": se, "mean_length": length, "n_samples": 8, "n_problems": 100}
        for b in benches
    }
    return {
        "benchmarks": per,
        "average": {"accuracy": acc, "mean_length": length},
        "config": {
            "model": "m",
            "backend": {"backend": "replay"},
            "generation": {"preset": "x", "max_new_tokens": None},
        },
    }


def test_the_frontier_draws_each_runs_average_with_its_standard_error(tmp_path):
    drawn = plots.plot_frontier(
        [("a", summary(0.911, 900, 0.025)), ("b", summary(0.925, 950, 0.03))], tmp_path / "f.png"
    )
    # two benchmarks: the average's se = sqrt(2 se²) / 2, in points of %
    assert drawn["stderr"]["a"] == pytest.approx(100 * math.sqrt(2) * 0.025 / 2)
    assert drawn["stderr"]["b"] == pytest.approx(100 * math.sqrt(2) * 0.03 / 2)


def rows(n, truncated):
    return [{"num_tokens": 100 + i, "correct": False, "truncated": truncated} for i in range(n)]


def test_an_all_zero_accuracy_is_drawn_on_an_axis_from_zero(tmp_path):
    drawn = plots.plot_run(summary(0.0, 300, 0.0, ("aime2024",)), rows(20, False), tmp_path / "r.png")
    assert drawn["accuracy_axis"] == (0.0, 5.0)


def test_the_accuracy_axis_holds_the_error_bar(tmp_path):
    drawn = plots.plot_run(summary(0.5, 300, 0.1, ("aime2024",)), rows(20, False), tmp_path / "r.png")
    assert drawn["accuracy_axis"][0] == 0.0 and drawn["accuracy_axis"][1] >= 60.0


def test_unknown_truncation_gets_no_truncated_bar_or_legend_entry(tmp_path):
    drawn = plots.plot_run(summary(0.0, 300, 0.0, ("aime2024",)), rows(20, None), tmp_path / "r.png")
    assert "truncated" not in drawn["legend"] and "truncation unknown" in drawn["legend"]
    assert drawn["histogram_truncated"] is None and drawn["histogram_total"] == 20


def test_known_truncation_keeps_its_bar(tmp_path):
    drawn = plots.plot_run(summary(0.0, 300, 0.0, ("aime2024",)), rows(20, True), tmp_path / "r.png")
    assert "truncated" in drawn["legend"] and drawn["histogram_truncated"] == 20


def test_every_row_is_in_one_bar_when_truncation_is_known_for_some_rows_only(tmp_path):
    mixed = rows(15, True) + rows(10, None) + rows(5, False)
    drawn = plots.plot_run(summary(0.0, 300, 0.0, ("aime2024",)), mixed, tmp_path / "r.png")
    assert drawn["histogram_total"] == 30 and drawn["histogram_truncated"] == 15
    assert "truncated" in drawn["legend"] and "truncation unknown for some" in drawn["legend"]


def sweep(benches):
    return {
        "mode": "cap",
        "budgets": {
            str(b): {"benchmarks": {n: {"accuracy": b / 4000} for n in benches}, "average": {"accuracy": b / 4000}}
            for b in (500, 1000)
        },
    }


def test_one_benchmarks_budget_curve_is_one_line_named_as_both(tmp_path):
    drawn = plots.plot_budgets([("run", sweep(["math500"]))], tmp_path / "b.png")
    assert drawn["labels"] == ["run average = math500"] and drawn["lines"] == 1


def test_several_benchmarks_keep_their_lines_and_the_average(tmp_path):
    drawn = plots.plot_budgets([("run", sweep(["math500", "aime2024"]))], tmp_path / "b.png")
    assert drawn["labels"] == ["math500", "aime2024", "run average"] and drawn["lines"] == 3


def test_configuration_styles_never_repeat_past_ten():
    styles = plots.config_styles(25)
    assert len(set(styles)) == 25 and len({c for c, _ in styles}) == 25
    assert styles[0][1] != styles[10][1]
