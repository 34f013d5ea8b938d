"""AdaptThink (docs/methods.md#equations-adaptthink): the golden groups G-AT1..3 of the 2026 baselines spec (§9.3),
produced by the authors' reward manager and `compute_naive_outcome_advantage`, to 1e-6 on rewards and 1e-5 on
advantages; the `<think>`/`</think>` count rule as the reward function's flag; refusals of a batch without the
executor's fields or with a prompt lacking its reference accuracy; replay of a group that carries them."""

from __future__ import annotations

import json

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig
from lead_recipes.replay import batch_from_record
from lead_recipes.reward.logs import think_once

NOTHINK = [True] * 4 + [False] * 4  # §9.3: rollouts 0-3 no-think, 4-7 think


def step(acc, ref_acc, once=None, nothink=NOTHINK, **cfg):
    m = build_method(RecipeConfig.of({"method": "adaptthink", "adaptthink": cfg}))
    b = RolloutBatch(
        torch.tensor([acc], dtype=torch.bool),
        torch.full((1, len(acc)), 100.0),
        16384,
        nothink=torch.tensor([nothink]),
        think_once=torch.tensor([once if once is not None else [True] * len(acc)]),
        ref_acc=torch.tensor([ref_acc]),
    )
    return m.step(b)


@pytest.mark.parametrize(
    "acc, ref_acc, want",
    [
        ([1, 1, 0, 1, 1, 1, 1, 0], 0.75, [0.3, 0.3, -0.7, 0.3, 0.25, 0.25, 0.25, -0.75]),  # G-AT1 easy
        ([0, 0, 0, 0, 1, 0, 0, 1], 0.125, [-0.075] * 4 + [0.875, -0.125, -0.125, 0.875]),  # G-AT2 hard
        ([1] * 8, 1.0, [0.05] * 4 + [0.0] * 4),  # G-AT3 all correct: no group baseline
    ],
    ids=["G-AT1", "G-AT2", "G-AT3"],
)
def test_golden_groups_reward_is_accuracy_minus_reference_plus_delta_and_advantage_is_the_reward(acc, ref_acc, want):
    out = step(acc, ref_acc)
    assert out.rewards[0].tolist() == pytest.approx(want, abs=1e-6)
    assert out.advantages[0].tolist() == pytest.approx(want, abs=1e-5)


def test_a_correct_answer_that_breaks_the_count_rule_scores_zero_accuracy():
    out = step([1] * 8, 0.5, once=[True, False] * 4)
    assert out.rewards[0].tolist() == pytest.approx([0.55, -0.45, 0.55, -0.45, 0.5, -0.5, 0.5, -0.5], abs=1e-6)


def test_delta_and_rho_come_from_the_flags():
    out = step([0] * 8, 0.0, delta=0.1)
    assert out.rewards[0].tolist() == pytest.approx([0.1] * 4 + [0.0] * 4, abs=1e-6)
    assert out.stats["nothink_frac"] == 0.5


@pytest.mark.parametrize(
    "response, ok",
    [
        ("</think>The answer is \\boxed{4}.", True),  # a no-think response: the forced `</think>` first
        ("Alright, 2+2 is 4.\n</think>\n\\boxed{4}", True),  # a thinking one
        ("Alright, 2+2 is 4. \\boxed{4}</think>", False),  # the box only inside the thinking
        ("Alright.</think>maybe</think>\\boxed{4}", False),  # two closers
        ("</think><think>again</think>\\boxed{4}", False),  # a reopened thinking block
        ("Alright, \\boxed{4}", False),  # never closed
    ],
)
def test_count_rule_needs_no_opener_one_closer_and_a_box_after_it(response, ok):
    assert think_once(response) is ok


def test_a_batch_without_the_executors_fields_is_refused_naming_them():
    m = build_method(RecipeConfig.of({"method": "adaptthink"}))
    b = RolloutBatch(torch.ones(1, 2, dtype=torch.bool), torch.full((1, 2), 10.0), 100)
    with pytest.raises(ValueError, match="nothink, think_once, ref_acc"):
        m.step(b)


def test_a_prompt_without_reference_accuracy_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"prompt 0: ref_acc .* no \"ref_acc\""):
        step([1] * 8, -1.0)


def test_replay_runs_a_group_carrying_nothink_and_ref_acc():
    group = {"correct": [True, True, False, True, True, True, True, False], "lengths": [100] * 8}
    group.update(nothink=NOTHINK, think_once=[True] * 8, ref_acc=0.75)
    batch = batch_from_record(json.loads(json.dumps({"step": 1, "groups": [group]})), 16384)
    out = build_method(RecipeConfig.of({"method": "adaptthink"})).step(batch)
    assert out.rewards[0].tolist() == pytest.approx([0.3, 0.3, -0.7, 0.3, 0.25, 0.25, 0.25, -0.75], abs=1e-6)


def test_replay_of_a_group_without_nothink_is_refused():
    group = {"correct": [True, False], "lengths": [100, 100], "think_once": [True, True], "ref_acc": 0.5}
    batch = batch_from_record({"step": 3, "groups": [group]}, 16384)
    with pytest.raises(ValueError, match="nothink"):
        build_method(RecipeConfig.of({"method": "adaptthink"})).step(batch)


def test_preflight_refuses_training_data_whose_labels_lack_ref_acc_naming_the_fix(tmp_path):
    from lead_recipes.training.data_check import check_data

    rows = [{"prompt": "q1", "label": {"answer": "1", "ref_acc": 0.5}}, {"prompt": "q2", "label": {"answer": "2"}}]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bad = check_data("data", str(path), "prompt", "label", "train", method="adaptthink")
    assert not bad.ok and "row 2" in bad.detail and "ref_acc" in bad.detail and "reference accuracy" in bad.detail
    path.write_text(json.dumps(rows[0]) + "\n")
    assert check_data("data", str(path), "prompt", "label", "train", method="adaptthink").ok


@pytest.mark.parametrize("value", [1.5, -0.25, None, True, float("nan")])
def test_preflight_refuses_a_ref_acc_that_is_not_a_number_in_0_1_which_the_method_would_refuse_mid_run(tmp_path, value):
    from lead_recipes.training.data_check import check_data

    rows = [{"prompt": "q1", "label": {"answer": "1", "ref_acc": 1.0}}, {"prompt": "q2", "label": {"answer": "2"}}]
    rows[1]["label"]["ref_acc"] = value
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bad = check_data("data", str(path), "prompt", "label", "train", method="adaptthink")
    assert not bad.ok and "row 2" in bad.detail and "a number in [0, 1]" in bad.detail and repr(value) in bad.detail


def test_replay_from_rollouts_carries_nothink_and_ref_acc_and_reads_the_count_rule_from_each_response(tmp_path):
    from lead_recipes.cli import main as cli_main

    samples = [
        {"response": "</think>So \\boxed{3}", "nothink": True},  # correct, well formed: acc 1
        {"response": "</think>So \\boxed{4}", "nothink": True},  # wrong: acc 0
        {"response": "Alright, 1+2=3.</think>\\boxed{3}", "nothink": False},  # correct: acc 1
        {"response": "Alright, \\boxed{3}</think></think>", "nothink": False},  # correct but two closers: acc 0
    ]
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps({"answer": "3", "ref_acc": 0.5, "samples": samples}) + "\n")
    built, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    argv = ["replay", "--replay.from_rollouts", str(src), "--replay.write_input", str(built), "--output", str(out)]
    assert cli_main([*argv, "--recipe.method", "adaptthink", "--no-replay.progress_enable"]) == 0
    group = json.loads(built.read_text())["groups"][0]
    assert group["nothink"] == [True, True, False, False] and group["ref_acc"] == 0.5
    assert group["think_once"] == [True, True, True, False]
    assert json.loads(out.read_text())["rewards"][0] == pytest.approx([0.55, -0.45, 0.5, -0.5], abs=1e-6)
