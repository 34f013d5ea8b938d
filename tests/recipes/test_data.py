"""`lead-recipes data` on ../shared/data: MATH level 3-5 selection, benchmark de-contamination with a report,
filters, templates, and the GRPO-LEAD stage-2 curriculum selector on the per-problem records training writes
(recipe_problems.jsonl); an old flag spelling fails naming the new one."""

from __future__ import annotations

import hashlib
import json

import pytest

from lead_recipes import data
from lead_recipes.benchmarks import BENCHMARKS
from lead_recipes.curriculum import hard_problems, problem_accuracy, seeded_rows


def read(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def run(*argv) -> int:
    return data.main([str(a) for a in argv])


@pytest.fixture(scope="module")
def l35(shared_data, tmp_path_factory):
    """math-l35 built once: (rows, report)."""
    out = tmp_path_factory.mktemp("l35") / "l35.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "math-l35",
            "--input",
            shared_data / "train/math_level3to5.jsonl",
            "--data.benchmarks_dir",
            shared_data / "benchmarks",
            "--output",
            out,
        )
        == 0
    )
    return read(out), json.loads(open(f"{out}.report.json").read())


def bench_keys(shared_data):
    keys = {}
    for name in BENCHMARKS:
        for row in read(shared_data / "benchmarks" / f"{name}.jsonl"):
            keys[data.normalize_problem(row["problem"])] = f"{name}:{row['id']}"
    return keys


def test_math_level_3_to_5_selects_8521_problems(l35):
    assert l35[1]["read"] == l35[1]["selected"] == 8521


def test_math_level_3_to_5_without_cleaning_writes_8521_rows(shared_data, tmp_path):
    out = tmp_path / "raw.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "math-l35",
            "--input",
            shared_data / "train/math_level3to5.jsonl",
            "--no-data.dedup_enable",
            "--no-data.decontaminate_enable",
            "--output",
            out,
        )
        == 0
    )
    rows = read(out)
    assert len(rows) == 8521 and len({r["id"] for r in rows}) == 8521


def test_benchmark_overlap_is_reported_and_removed(l35, shared_data):
    rows, report = l35
    keys = bench_keys(shared_data)
    assert not [r["id"] for r in rows if data.normalize_problem(r["problem"]) in keys]
    removed = [r for r in report["removed"] if r["reason"] == "benchmark"]
    assert report["removed_benchmark"] == len(removed) > 0
    source = {r["id"]: r for r in read(shared_data / "train/math_level3to5.jsonl")}
    for r in removed:  # each reported match really is that benchmark problem
        assert keys[data.normalize_problem(source[r["id"]]["problem"])] in r["matches"]
    assert len(rows) == 8521 - len(report["removed"])


def test_duplicates_keep_the_first_occurrence_and_are_reported(l35):
    rows, report = l35
    dups = [r for r in report["removed"] if r["reason"] == "duplicate"]
    kept = {r["id"] for r in rows}
    assert dups and all(d["duplicate_of"] in kept and d["id"] not in kept for d in dups)
    assert len({data.normalize_problem(r["problem"]) for r in rows}) == len(rows)


@pytest.mark.parametrize(
    "extra, summary",
    [
        ([], "removed 1 duplicate and 1 benchmark problem (amc2023 1), wrote 2 rows"),
        (
            ["--no-data.decontaminate_enable"],
            "removed 1 duplicate (benchmark problems kept: --no-data.decontaminate_enable), wrote 3 rows",
        ),
    ],
)
def test_build_summary_counts_in_words_not_a_dict(shared_data, tmp_path, capsys, extra, summary):
    """Counts in words, never `removed 1 duplicates and 0 benchmark problems {}`."""
    amc = read(shared_data / "benchmarks" / "amc2023.jsonl")[0]
    rows = [
        {"id": "a", "problem": "What is 1+1?", "answer": "2"},
        {"id": "b", "problem": "What is  1+1?", "answer": "2"},
        {"id": "c", "problem": amc["problem"], "answer": amc["answer"]},
        {"id": "d", "problem": "What is 2+2?", "answer": "4"},
    ]
    (tmp_path / "src.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["build", "--data.preset", "jsonl", "--input", tmp_path / "src.jsonl", "--output", tmp_path / "o.jsonl"]
    assert run(*argv, "--data.benchmarks_dir", shared_data / "benchmarks", *extra) == 0
    out = capsys.readouterr().out
    assert f"jsonl: read 4, selected 4, {summary} to {tmp_path / 'o.jsonl'}" in out


def test_build_reads_benchmarks_from_data_benchmarks_offline_without_a_flag(shared_data, tmp_path, monkeypatch):
    """docs/launch.md's `data build` runs offline without --data.benchmarks_dir: ./data/benchmarks (beside
    ./data/sources) is the default when it exists."""
    monkeypatch.delenv("LEAD_RECIPES_BENCHMARKS_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "benchmarks").symlink_to(shared_data / "benchmarks")
    amc = read(shared_data / "benchmarks" / "amc2023.jsonl")[0]
    rows = [{"id": "a", "problem": "What is 1+1?", "answer": "2"}, {"id": "b", **amc}]
    (tmp_path / "src.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run("build", "--data.preset", "jsonl", "--input", "src.jsonl", "--output", "data/o.jsonl") == 0
    assert [r["id"] for r in read(tmp_path / "data" / "o.jsonl")] == ["a"]


def test_full_math_levels_3_to_5_removes_every_math500_problem_of_those_levels(shared_data, tmp_path):
    out = tmp_path / "math.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "math",
            "--input",
            shared_data / "train/math_full.jsonl",
            "--data.benchmarks_dir",
            shared_data / "benchmarks",
            "--output",
            out,
        )
        == 0
    )
    report = json.loads(open(f"{out}.report.json").read())
    m500 = [r for r in read(shared_data / "benchmarks/math500.jsonl") if int(r["level"]) in (3, 4, 5)]
    assert report["removed_benchmark_by_name"]["math500"] == len(m500)
    assert {int(r["level"]) for r in read(out)} == {3, 4, 5}


def test_subject_level_and_split_filters_select_exactly_the_matching_rows(shared_data, tmp_path):
    out = tmp_path / "nt.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "math",
            "--input",
            shared_data / "train/math_full.jsonl",
            "--filter.levels",
            "5",
            "--filter.subjects",
            "Number Theory",
            "--filter.split",
            "train",
            "--no-data.decontaminate_enable",
            "--no-data.dedup_enable",
            "--output",
            out,
        )
        == 0
    )
    expected = [
        r["id"]
        for r in read(shared_data / "train/math_full.jsonl")
        if r["level"] == 5 and r["subject"] == "Number Theory" and r["split"] == "train"
    ]
    assert [r["id"] for r in read(out)] == expected


def test_deepscaler_difficulty_filter_keeps_only_problems_at_or_above_it(shared_data, tmp_path):
    out = tmp_path / "ds.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "deepscaler",
            "--input",
            shared_data / "train/grpo_lead_stage2_3.jsonl",
            "--filter.min_difficulty",
            3.5,
            "--no-data.decontaminate_enable",
            "--no-data.dedup_enable",
            "--output",
            out,
        )
        == 0
    )
    src = read(shared_data / "train/grpo_lead_stage2_3.jsonl")
    assert len(read(out)) == sum(float(r["difficulty"]) >= 3.5 for r in src) > 0


@pytest.mark.parametrize(
    "template, marker",
    [
        ("deepscaler", "Let's think step by step and output the final answer within \\boxed{}."),
        ("r1", "Please reason step by step, and put your final answer within \\boxed{}."),
        ("sober", "Therefore, the final answer is: $\\boxed{ANSWER}$. I hope it is correct"),
    ],
)
def test_paper_templates_wrap_the_problem(template, marker):
    row = data.render({"id": "x", "problem": "What is 1+1?", "answer": "2"}, template, "text", None)
    assert marker in row["prompt"] and "What is 1+1?" in row["prompt"] and row["label"] == "2"


def test_an_unknown_template_name_is_refused_before_the_source_is_read(tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "jsonl",
            "--input",
            tmp_path / "missing.jsonl",
            "--prompt.template",
            "leed",
            "--output",
            out,
        )
        == 2
    )
    assert "--prompt.template must be one of sober, deepscaler, r1, raw" in capsys.readouterr().err
    assert not out.exists()


def test_messages_format_writes_chat_turns_with_the_system_prompt():
    row = data.render({"id": "x", "problem": "P", "answer": "2"}, "r1", "messages", "be brief")
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and row["prompt"][1]["content"].startswith("P")


def test_normalisation_ignores_typesetting_but_not_operators():
    assert data.normalize_problem("Compute $x^{4}+j x^{2}$.") == data.normalize_problem("Compute $x^4 + jx^2.$")
    assert data.normalize_problem("\\dfrac{1}{2}") == data.normalize_problem("\\frac12")
    assert data.normalize_problem("roots of $z^4 - z^2 + 1$") != data.normalize_problem("roots of $z^4 + z^2 + 1$")


def test_field_mapping_error_names_the_missing_field(shared_data, tmp_path, capsys):
    assert (
        run(
            "build",
            "--data.preset",
            "jsonl",
            "--input",
            shared_data / "train/deepscaler_aime_1983_2023.jsonl",
            "--data.problem_key",
            "question",
            "--no-data.decontaminate_enable",
            "--output",
            tmp_path / "x.jsonl",
        )
        == 2
    )
    assert "'question'" in capsys.readouterr().err and not (tmp_path / "x.jsonl").exists()


def test_malformed_source_line_is_named(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"problem": "a", "answer": "1"}\n{not json\n')
    assert (
        run(
            "build",
            "--data.preset",
            "jsonl",
            "--input",
            src,
            "--no-data.decontaminate_enable",
            "--output",
            tmp_path / "o.jsonl",
        )
        == 2
    )
    assert "bad.jsonl:2" in capsys.readouterr().err


# ---------------------------------------------------------------- curriculum
def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


@pytest.fixture()
def stage1(l35, tmp_path):
    rows = l35[0][:6]
    path = tmp_path / "stage1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows, path


def records(rows, spec):
    """Per-problem training records: spec = {row index: [(step, correct, total), ...]} keyed as training writes them."""
    out = []
    for i, steps in spec.items():
        for step, correct, total in steps:
            out.append(
                {
                    "step": step,
                    "problem": sha1(rows[i]["prompt"])[:16],
                    "prompt_sha1": sha1(rows[i]["prompt"]),
                    "correct": correct,
                    "total": total,
                    "mean_length": 100.0,
                }
            )
    return out


def test_curriculum_picks_problems_at_or_below_the_threshold_and_merges(stage1, tmp_path):
    rows, path = stage1
    recs = records(
        rows,
        {
            0: [(1, 6, 8)],  # 0.75: kept (<=)
            1: [(1, 7, 8)],  # 0.875: dropped
            2: [(1, 4, 8), (2, 8, 8)],  # 12/16 = 0.75 over both steps: kept
            3: [(1, 8, 8), (2, 0, 8)],  # 0.5: kept
            4: [(1, 0, 8)],
        },
    )  # 0.0: kept; row 5 has no record: not selected
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    extra = tmp_path / "extra.jsonl"
    extra.write_text(
        json.dumps({"prompt": "new problem", "label": "3", "problem": "new problem"})
        + "\n"
        + json.dumps(rows[0])
        + "\n"
    )  # a duplicate of a selected problem is not merged twice
    out = tmp_path / "stage2.jsonl"
    assert (
        run(
            "curriculum",
            "--curriculum.problems",
            tmp_path / "p.jsonl",
            "--curriculum.dataset",
            path,
            "--curriculum.threshold",
            0.75,
            "--curriculum.merge",
            extra,
            "--output",
            out,
        )
        == 0
    )
    got = [r.get("id", r["prompt"]) for r in read(out)]
    assert got == [rows[0]["id"], rows[2]["id"], rows[3]["id"], rows[4]["id"], "new problem"]


def test_curriculum_report_counts_each_problem_with_records_once(stage1, tmp_path):
    """Each record carries two keys (prompt_sha1 and its 16-hex `problem` prefix): the report counts problems, not
    the 2 x 5 keys."""
    rows, path = stage1
    recs = records(rows, {i: [(1, 4, 8), (2, 5, 8)] for i in range(5)})
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "s2.jsonl"
    assert (
        run("curriculum", "--curriculum.problems", tmp_path / "p.jsonl", "--curriculum.dataset", path, "--output", out)
        == 0
    )
    report = json.loads(open(f"{out}.report.json").read())
    assert (report["records"], report["problems_with_records"], report["matched"]) == (10, 5, 5)


def test_curriculum_since_step_uses_only_later_records(stage1, tmp_path):
    rows, path = stage1
    recs = records(rows, {0: [(1, 0, 8), (5, 8, 8)], 1: [(1, 8, 8), (5, 0, 8)]})
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "s2.jsonl"
    assert (
        run(
            "curriculum",
            "--curriculum.problems",
            tmp_path / "p.jsonl",
            "--curriculum.dataset",
            path,
            "--curriculum.since_step",
            5,
            "--output",
            out,
        )
        == 0
    )
    assert [r["id"] for r in read(out)] == [rows[1]["id"]]


def test_curriculum_without_any_matching_record_is_an_error(stage1, tmp_path, capsys):
    _, path = stage1
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"step": 1, "problem": "zz", "prompt_sha1": "0" * 40, "correct": 1, "total": 8, "mean_length": 1.0})
        + "\n"
    )
    assert (
        run(
            "curriculum",
            "--curriculum.problems",
            tmp_path / "p.jsonl",
            "--curriculum.dataset",
            path,
            "--output",
            tmp_path / "o",
        )
        == 2
    )
    assert "none of the 6 rows" in capsys.readouterr().err


def test_curriculum_rejects_impossible_counts(stage1, tmp_path, capsys):
    _, path = stage1
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"step": 1, "problem": "a", "prompt_sha1": "b", "correct": 9, "total": 8, "mean_length": 1.0}) + "\n"
    )
    assert (
        run(
            "curriculum",
            "--curriculum.problems",
            tmp_path / "p.jsonl",
            "--curriculum.dataset",
            path,
            "--output",
            tmp_path / "o",
        )
        == 2
    )
    assert "correct=9" in capsys.readouterr().err


@pytest.mark.slow
def test_curriculum_matches_hashes_of_prompts_as_openrlhf_renders_them(stage1, tiny_qwen2, tmp_path):
    """The trainer hashes the prompt OpenRLHF built (chat template applied); --curriculum.tokenizer reproduces it."""
    from openrlhf.datasets.prompts_dataset import preprocess_data
    from transformers import AutoTokenizer

    rows, path = stage1
    tok = AutoTokenizer.from_pretrained(tiny_qwen2)
    rendered = [preprocess_data(r, None, "prompt", "label", tok.apply_chat_template)[0] for r in rows]
    recs = [
        {"step": 1, "problem": sha1(p)[:16], "prompt_sha1": sha1(p), "correct": c, "total": 8, "mean_length": 1.0}
        for p, c in zip(rendered, (8, 2, 8, 8, 1, 8))
    ]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "s2.jsonl"
    assert (
        run(
            "curriculum",
            "--curriculum.problems",
            tmp_path / "p.jsonl",
            "--curriculum.dataset",
            path,
            "--curriculum.tokenizer",
            tiny_qwen2,
            "--output",
            out,
        )
        == 0
    )
    assert [r["id"] for r in read(out)] == [rows[1]["id"], rows[4]["id"]]


def test_nested_fields_and_chat_message_problems_are_mapped(tmp_path):
    src = tmp_path / "hub_like.jsonl"
    src.write_text(
        json.dumps(
            {
                "prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "2+3?"}],
                "reward_model": {"ground_truth": "5"},
                "extra_info": {"index": 7},
            }
        )
        + "\n"
    )
    out = tmp_path / "o.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "jsonl",
            "--input",
            src,
            "--data.problem_key",
            "prompt",
            "--data.answer_key",
            "reward_model.ground_truth",
            "--data.id_key",
            "extra_info.index",
            "--prompt.template",
            "raw",
            "--no-data.decontaminate_enable",
            "--output",
            out,
        )
        == 0
    )
    assert [(r["prompt"], r["label"], r["id"]) for r in read(out)] == [("2+3?", "5", "7")]


def test_two_stages_cut_from_one_seeded_order_continue_it_and_each_pass_is_a_permutation():
    rows = [{"id": i} for i in range(5)]
    whole = seeded_rows(rows, 7, 0, 12)
    assert seeded_rows(rows, 7, 0, 4) + seeded_rows(rows, 7, 4, 8) == whole
    assert sorted(r["id"] for r in whole[:5]) == sorted(r["id"] for r in whole[5:10]) == list(range(5))
    assert whole[:5] != whole[5:10]  # passes are reshuffled, not repeated
    assert seeded_rows([], 7, 0, 3) == []


def test_a_problem_is_hard_at_the_threshold_itself_and_only_with_enough_attempts():
    def rec(text, correct, total):
        return {"step": 1, "prompt_sha1": sha1(text), "correct": correct, "total": total}

    acc = problem_accuracy([rec("a", 6, 8), rec("b", 7, 8), rec("c", 0, 1)])
    rows = [{"prompt": p, "id": p} for p in "abcd"]
    picked, matched, report = hard_problems(rows, acc, threshold=0.75, min_attempts=2)
    assert [r["id"] for r in picked] == ["a"] and matched == 3  # b is too easy, c too rarely tried, d unrecorded
    assert report == [{"id": "a", "accuracy": 0.75, "total": 8}]


# ---------------------------------------------------------------- L1 targets and ThinkPrune limits
@pytest.fixture(scope="module")
def math_source(shared_data):
    return shared_data / "train/math_level3to5.jsonl"


def build_l1(source, out, *flags):
    argv = ["build", "--data.preset", "jsonl", "--input", source, "--output", out, "--no-data.decontaminate_enable"]
    assert run(*argv, *flags) == 0
    return read(out), json.loads(open(f"{out}.report.json").read())


def test_l1_exact_prompts_end_with_the_target_their_label_carries(math_source, tmp_path):
    from lead_recipes.grading.labels import gold_answer, label_problem

    rows, report = build_l1(math_source, tmp_path / "l1.jsonl", "--l1.mode", "exact")
    assert len(rows) == report["written"] == report["l1"]["rows"] > 8000 and report["l1"]["max_rows"] == 0
    plain = data.render({"id": "x", "problem": rows[0]["problem"], "answer": "1"}, "deepscaler", "text", None)
    assert rows[0]["prompt"] == plain["prompt"] + f" Think for {rows[0]['label']['n_gold']} tokens."
    for row in rows:
        label = row["label"]
        assert label["l1_mode"] == "exact" and row["prompt"].endswith(f" Think for {label['n_gold']} tokens.")
        assert 100 <= label["n_gold"] <= 4000 and label["id"] == row["id"]
        assert label_problem(label) is None and gold_answer(label) == label["answer"] != ""
    # U{100..4000}: mean 2050, sd 1126; 5 standard errors
    mean = sum(r["label"]["n_gold"] for r in rows) / len(rows)
    assert abs(mean - 2050) < 5 * 1126 / len(rows) ** 0.5 and report["l1"]["n_gold_mean"] == pytest.approx(mean)


def test_l1_draw_includes_both_ends_and_nothing_outside():
    from lead_recipes.length_prompts import draw

    seen = {draw(0, f"k{i}", 7, 9, 0.0)[0] for i in range(300)}
    assert seen == {7, 8, 9}


def test_an_examples_target_depends_on_its_id_and_the_l1_seed_not_on_order_or_limit(math_source, tmp_path):
    a, _ = build_l1(math_source, tmp_path / "a.jsonl", "--l1.mode", "exact", "--seed", "1", "--limit", "3000")
    b, _ = build_l1(math_source, tmp_path / "b.jsonl", "--l1.mode", "exact", "--seed", "2")
    c, _ = build_l1(math_source, tmp_path / "c.jsonl", "--l1.mode", "exact", "--seed", "1", "--l1.seed", "5")
    by_id = {r["id"]: r["label"]["n_gold"] for r in b}
    assert [r["id"] for r in a] != [r["id"] for r in b][:3000]  # really another order and subset
    assert all(by_id[r["id"]] == r["label"]["n_gold"] for r in a)
    other = {r["id"]: r["label"]["n_gold"] for r in c}
    assert sum(other[r["id"]] != r["label"]["n_gold"] for r in a) > 2900


def test_l1_max_data_asks_for_at_most_n_tokens_in_about_half_of_the_prompts(math_source, tmp_path):
    rows, report = build_l1(math_source, tmp_path / "m.jsonl", "--l1.mode", "max")
    n_max = 0
    for row in rows:
        label = row["label"]
        word = "maximum " if label["l1_mode"] == "max" else ""
        assert row["prompt"].endswith(f" Think for {word}{label['n_gold']} tokens.")
        n_max += label["l1_mode"] == "max"
    assert abs(n_max / len(rows) - 0.5) < 5 * 0.5 / len(rows) ** 0.5
    assert report["l1"]["max_rows"] == n_max and report["l1"]["max_share"] == 0.5


def test_l1_draws_write_each_example_k_times_with_independent_targets(math_source, tmp_path):
    rows, _ = build_l1(math_source, tmp_path / "k.jsonl", "--l1.mode", "exact", "--l1.draws", "3", "--limit", "400")
    assert len(rows) == 1200
    by_id: dict = {}
    for row in rows:
        by_id.setdefault(row["id"], []).append(row["label"]["n_gold"])
    assert len(by_id) == 400 and all(len(v) == 3 for v in by_id.values())
    assert sum(len(set(v)) == 3 for v in by_id.values()) > 390


def test_l1_target_goes_on_the_user_turn_of_chat_messages():
    from lead_recipes.length_prompts import with_suffix

    msgs = data.render({"id": "x", "problem": "P", "answer": "2"}, "r1", "messages", "be brief")["prompt"]
    out = with_suffix(msgs, " Think for 512 tokens.")
    assert out[0] == msgs[0] and out[1]["content"] == msgs[1]["content"] + " Think for 512 tokens."


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--l1.draws", "2"], "need --l1.mode"),
        (["--l1.mode", "exact", "--l1.max_share", "0.3"], "needs --l1.mode max"),
        (["--l1.mode", "max", "--l1.max_share", "1.5"], "must be in [0, 1]"),
        (["--l1.mode", "exact", "--l1.min_tokens", "500", "--l1.max_tokens", "100"], "need 1 ≤ min ≤ max"),
        (["--prompt.length_limit", "3000"], "add --prompt.format messages"),
        (["--prompt.format", "messages", "--prompt.length_limit", "0"], "positive token count"),
    ],
)
def test_length_options_that_cannot_apply_are_refused_before_the_source_is_read(tmp_path, capsys, flags, message):
    out = tmp_path / "o.jsonl"
    assert run("build", "--data.preset", "jsonl", "--input", tmp_path / "missing.jsonl", "--output", out, *flags) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_thinkprune_limit_is_appended_to_the_authors_system_prompt(math_source, tmp_path):
    from lead_recipes.prompts import SYSTEM_PROMPTS

    flags = ["--prompt.format", "messages", "--prompt.system", "thinkprune", "--prompt.length_limit", "3000"]
    rows, report = build_l1(math_source, tmp_path / "t.jsonl", "--limit", "5", *flags)
    system = SYSTEM_PROMPTS["thinkprune"] + " The output of the assistant should be within 3000 tokens."
    assert system.endswith("<answer> answer here</answer>. The output of the assistant should be within 3000 tokens.")
    assert all(r["prompt"][0] == {"role": "system", "content": system} for r in rows)
    assert report["system_prompt"] == system and report["l1"] is None
    alone, _ = build_l1(
        math_source,
        tmp_path / "u.jsonl",
        "--limit",
        "1",
        "--prompt.format",
        "messages",
        "--prompt.length_limit",
        "2000",
    )
    assert alone[0]["prompt"][0]["content"] == "The output of the assistant should be within 2000 tokens."


def test_an_object_answer_is_read_by_its_answer_key_and_one_without_it_is_refused_naming_the_row(tmp_path, capsys):
    """A source whose answer field holds a label object (the documented form) gets its gold answer as the label,
    never the object's string form (which would grade `wrong` on every sample)."""
    src = tmp_path / "objects.jsonl"
    src.write_text(json.dumps({"id": "p1", "problem": "2+3?", "answer": {"id": "p1", "answer": "5"}}) + "\n")
    out = tmp_path / "o.jsonl"
    argv = ["build", "--data.preset", "jsonl", "--input", src, "--no-data.decontaminate_enable", "--output", out]
    assert run(*argv) == 0
    assert [r["label"] for r in read(out)] == ["5"]
    src.write_text(src.read_text() + json.dumps({"id": "p2", "problem": "2+4?", "answer": {"value": "6"}}) + "\n")
    out.unlink()
    assert run(*argv) == 2
    err = capsys.readouterr().err
    assert "row 1" in err and "'answer'" in err and "keys: value" in err and not out.exists()
