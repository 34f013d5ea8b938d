"""`lead-recipes replay`: JSONL in → per-step rewards/advantages/controller out (matching Method.step exactly), a PNG
and a table; --from-rollouts grades the shared rollouts file with the real package grader; bad input is named."""
from __future__ import annotations

import json

import pytest
import torch

from lead_recipes.cli import main as cli_main
from lead_recipes.methods.config import RecipeConfig
from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch

STEPS = [
    {"step": 1, "groups": [{"correct": [True, False, True, False], "lengths": [1200, 3000, 1800, 4000]},
                           {"correct": [False, False, False, False], "lengths": [500, 900, 2000, 4000]}]},
    {"step": 2, "groups": [{"correct": [True, True, True, False], "lengths": [900, 1500, 1300, 2200]},
                           {"correct": [True, False, False, False], "lengths": [2500, 600, 700, 800]}]},
]


def write(tmp_path, steps):
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in steps))
    return p


@pytest.mark.parametrize("method,key", [("lead", "lambda_c"), ("leash", "lagrange_lambda")])
def test_replay_output_equals_stepping_the_method_directly(tmp_path, capsys, method, key):
    out = tmp_path / "out.jsonl"
    argv = ["replay", str(write(tmp_path, STEPS)), "-o", str(out), "--recipe.method", method,
            "--recipe.leash.target_length", "1000"]
    assert cli_main(argv) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    m = build_method(RecipeConfig.of({"method": method, "leash": {"target_length": 1000.0}}))
    for rec, line in zip(STEPS, lines):
        b = RolloutBatch(torch.tensor([g["correct"] for g in rec["groups"]]),
                         torch.tensor([g["lengths"] for g in rec["groups"]], dtype=torch.float32), 4000)
        ref = m.step(b)
        assert line["step"] == rec["step"] and line["advantages"] == ref.advantages.tolist()
        assert line["rewards"] == ref.rewards.tolist() and line["controller"] == m.state_dict()["controller"]
        assert key in line["controller"]
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out
    assert "step" in table and key in table


def test_replay_stateless_method_has_empty_controller(tmp_path):
    out = tmp_path / "o.jsonl"
    assert cli_main(["replay", str(write(tmp_path, STEPS)), "-o", str(out), "--recipe.method", "grpo"]) == 0
    assert all(json.loads(x)["controller"] == {} for x in out.read_text().splitlines())


@pytest.mark.parametrize("mutate,match", [
    (lambda s: s[1]["groups"][1].update(lengths=[1, 2, 3]), "step 2, prompt 1: 'lengths' has 3 entries"),
    (lambda s: s[1]["groups"][1].update(correct=[True, False]), "step 2, prompt 1: G = 2"),
    (lambda s: s[0]["groups"][0].update(lengths=[1200, 0, 10, 10]), "step 1: prompt 0: lengths must be > 0"),
    (lambda s: s[0]["groups"][1].update(correct=[1, 0, 0, 0]), "step 1, prompt 1: 'correct' must be a list of bool"),
    (lambda s: s[0].update(groups=[]), "step 1: 'groups' must be a non-empty list"),
    (lambda s: s[0]["groups"][0].update(lengths=[1, 2, 3, 5000]), "exceed max_new_tokens"),
])
def test_bad_input_names_step_and_prompt_and_writes_nothing(tmp_path, capsys, mutate, match):
    steps = json.loads(json.dumps(STEPS))
    mutate(steps)
    out = tmp_path / "o.jsonl"
    assert cli_main(["replay", str(write(tmp_path, steps)), "-o", str(out)]) == 2
    assert match in capsys.readouterr().err and not out.exists()


def test_replay_from_rollouts_grades_and_chunks_the_shared_file(tmp_path, capsys, shared_data):
    src = shared_data / "rollouts" / "qwen25math_cot_math100x8.jsonl"
    out, built = tmp_path / "o.jsonl", tmp_path / "in.jsonl"
    assert cli_main(["replay", "--from-rollouts", str(src), "--prompts-per-step", "25", "-o", str(out),
                     "--write-input", str(built), "--recipe.method", "lead"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [ln["step"] for ln in lines] == [1, 2, 3, 4]
    assert all(len(ln["advantages"]) == 25 and len(ln["advantages"][0]) == 8 for ln in lines)
    groups = [g for rec in map(json.loads, built.read_text().splitlines()) for g in rec["groups"]]
    acc = sum(sum(g["correct"]) for g in groups) / 800
    assert 0.85 <= acc <= 0.97          # PROVENANCE: mean accuracy 0.91 by the source's own grader
    assert "APPROXIMATION" in capsys.readouterr().out


def test_replay_needs_exactly_one_input(tmp_path):
    with pytest.raises(SystemExit):
        cli_main(["replay", "-o", str(tmp_path / "o.jsonl")])


def test_from_rollouts_counts_lengths_with_a_real_tokenizer(tmp_path, tiny_qwen2):
    from transformers import AutoTokenizer
    texts = ["The sum is \\boxed{3}.", "I think it is \\boxed{4} after a long detour of thought.",
             "Let x = 1. Then x + 2 = 3, so \\boxed{3}.", "no idea"]
    src = tmp_path / "rollouts.jsonl"
    src.write_text(json.dumps({"id": "a", "problem": "1+2?", "answer": "3",
                               "samples": [{"response": t} for t in texts]}) + "\n")
    built, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    assert cli_main(["replay", "--from-rollouts", str(src), "--tokenizer", str(tiny_qwen2), "-o", str(out),
                     "--write-input", str(built), "--recipe.method", "grpo-lead"]) == 0
    group = json.loads(built.read_text())["groups"][0]
    tok = AutoTokenizer.from_pretrained(str(tiny_qwen2))
    assert group["lengths"] == [len(tok.encode(t, add_special_tokens=False)) + 1 for t in texts]
    assert group["correct"] == [True, False, True, False]


def test_empty_input_is_an_error(tmp_path, capsys):
    src = tmp_path / "empty.jsonl"
    src.write_text("\n")
    assert cli_main(["replay", str(src), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "no steps to replay" in capsys.readouterr().err


def test_non_json_line_names_the_line(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps(STEPS[0]) + "\n{not json\n")
    assert cli_main(["replay", str(src), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "bad.jsonl:2: invalid JSON" in capsys.readouterr().err
