"""The paper recipes train what the papers trained: prompt formats the reward credits, step counts, seeded data
draws, the GRPO-LEAD 14B chain (SFT -> stage 1 -> stage 2a -> stage 2b), lengths and GPU counts. Data-side pieces
(`data build --seed`, the `dapo` preset, `curriculum --seed/--skip/--rows`) run on ../shared/data."""
from __future__ import annotations

import json

import pytest

from lead_recipes import data


def read(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def run(*argv) -> int:
    return data.main([str(a) for a in argv])


# ---------------------------------------------------------------- data build --seed
def build_deepscaler(shared_data, out, *extra):
    assert run("build", "--preset", "deepscaler", "--source", shared_data / "train/deepscaler_aime_1983_2023.jsonl",
               "--no-decontaminate", "--out", out, *extra) == 0
    return [r["id"] for r in read(out)], json.loads(open(f"{out}.report.json").read())


def test_seeded_build_draws_a_random_first_n_not_the_file_prefix(shared_data, tmp_path):
    plain, _ = build_deepscaler(shared_data, tmp_path / "plain.jsonl")
    seeded, report = build_deepscaler(shared_data, tmp_path / "seeded.jsonl", "--seed", 7)
    assert sorted(seeded) == sorted(plain) and report["seed"] == 7
    first = seeded[:100]            # what data.max_samples 100 would keep
    assert first != plain[:100] and len(set(first) - set(plain[:100])) > 50


def test_seeded_build_is_reproducible_and_the_seed_decides_the_order(shared_data, tmp_path):
    a, _ = build_deepscaler(shared_data, tmp_path / "a.jsonl", "--seed", 7)
    b, _ = build_deepscaler(shared_data, tmp_path / "b.jsonl", "--seed", 7)
    c, _ = build_deepscaler(shared_data, tmp_path / "c.jsonl", "--seed", 8)
    assert a == b and a != c


def test_unseeded_build_records_no_seed(shared_data, tmp_path):
    assert build_deepscaler(shared_data, tmp_path / "p.jsonl")[1]["seed"] is None


# ---------------------------------------------------------------- dapo preset, sober template
DAPO_ROW = {"prompt": [{"role": "user", "content": data.DAPO_PREFIX + "\n\nWhat is $6 \\times 7$?\n\n"
                        + data.DAPO_SUFFIX}],
            "reward_model": {"ground_truth": "42"}, "extra_info": {"index": "d-1"}}


def test_dapo_preset_strips_dapos_answer_line_instruction_and_maps_its_fields(tmp_path):
    src = tmp_path / "dapo.jsonl"
    src.write_text(json.dumps(DAPO_ROW) + "\n")
    out = tmp_path / "out.jsonl"
    assert run("build", "--preset", "dapo", "--source", src, "--no-decontaminate", "--template", "r1",
               "--out", out) == 0
    (row,) = read(out)
    assert (row["problem"], row["label"], row["id"]) == ("What is $6 \\times 7$?", "42", "d-1")
    assert "Answer:" not in row["prompt"] and row["prompt"].endswith("within \\boxed{}.")


def test_sober_template_has_lightevals_two_spaces_after_clearly():
    # sober-reasoning lighteval_tasks.py MATH_QUERY_TEMPLATE: "...efficiently and clearly.  The last line..."
    assert "efficiently and clearly.  The last line of your response" in data.TEMPLATES["sober"]


# ---------------------------------------------------------------- curriculum --seed/--skip/--rows
@pytest.fixture()
def curriculum_inputs(tmp_path):
    rows = [{"id": f"p{i}", "prompt": f"problem {i}", "label": str(i), "problem": f"problem {i}"} for i in range(10)]
    ds = tmp_path / "stage1.jsonl"
    ds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recs = [{"step": 1, "problem": f"p{i}", "correct": 1, "total": 8} for i in range(10)]   # keyed by row id
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return ds, tmp_path / "p.jsonl"


def curriculum_ids(inputs, out, *extra):
    ds, problems = inputs
    assert run("curriculum", "--problems", problems, "--dataset", ds, "--out", out, *extra) == 0
    return [r["id"] for r in read(out)]


def test_curriculum_rows_writes_exactly_n_rows_in_reshuffled_passes(curriculum_inputs, tmp_path):
    ids = curriculum_ids(curriculum_inputs, tmp_path / "o.jsonl", "--seed", 3, "--rows", 25)
    assert len(ids) == 25
    assert sorted(ids[:10]) == sorted(ids[10:20]) == sorted(f"p{i}" for i in range(10))   # whole passes
    assert ids[:10] != ids[10:20]                                                        # each reshuffled


def test_curriculum_skip_continues_the_same_seeded_order(curriculum_inputs, tmp_path):
    whole = curriculum_ids(curriculum_inputs, tmp_path / "w.jsonl", "--seed", 3, "--rows", 24)
    first = curriculum_ids(curriculum_inputs, tmp_path / "a.jsonl", "--seed", 3, "--rows", 10)
    second = curriculum_ids(curriculum_inputs, tmp_path / "b.jsonl", "--seed", 3, "--skip", 10, "--rows", 14)
    assert first + second == whole
    assert json.loads(open(tmp_path / "b.jsonl.report.json").read())["seed"] == 3


def test_curriculum_rows_without_a_seed_is_an_error(curriculum_inputs, tmp_path, capsys):
    ds, problems = curriculum_inputs
    assert run("curriculum", "--problems", problems, "--dataset", ds, "--out", tmp_path / "o", "--rows", 5) == 2
    assert "--seed" in capsys.readouterr().err


def test_sft_build_keeps_difficulty_strictly_above_one_and_the_solution_as_response(tmp_path):
    src = tmp_path / "sft.jsonl"
    rows = [{"id": f"s{d}", "problem": f"problem {d}", "answer": "1", "difficulty": d, "solution": f"sol {d}"}
            for d in (0.5, 1.0, 1.0625, 3.0)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    assert run("build", "--preset", "deepscaler", "--source", src, "--no-decontaminate", "--above-difficulty", 1,
               "--response-key", "solution", "--template", "r1", "--out", out) == 0
    assert [(r["id"], r["response"]) for r in read(out)] == [("s1.0625", "sol 1.0625"), ("s3.0", "sol 3.0")]
