"""Bad input to any method: a defined result (docs/methods.md, edge cases) or a ValueError naming the offending prompt;
NaN/inf never leaves a method."""

from __future__ import annotations

import pytest
import torch
from support.batches import ready, targets

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import METHODS, RecipeConfig


def make(name):
    return ready(build_method(RecipeConfig.of({"method": name})))


GOOD_C = torch.tensor([[1, 0, 1, 0], [1, 1, 0, 0], [0, 1, 1, 1]], dtype=torch.bool)
GOOD_L = torch.tensor([[100, 200, 300, 400], [500, 600, 700, 800], [900, 1000, 1100, 1200]], dtype=torch.float32)


def bad_lengths(value, q=2, j=1):
    l = GOOD_L.clone()
    l[q, j] = value
    return l


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize(
    "value,match",
    [
        (0.0, "> 0"),
        (-5.0, "> 0"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (5000.0, "exceed max_new_tokens"),
    ],
)
def test_bad_length_is_a_value_error_naming_the_prompt(name, value, match):
    with pytest.raises(ValueError, match=f"prompt 2: .*{match}"):
        make(name).step(RolloutBatch(GOOD_C, bad_lengths(value), 4000))


@pytest.mark.parametrize("name", METHODS)
def test_nan_in_correctness_is_a_value_error_naming_the_prompt(name):
    c = GOOD_C.float()
    c[1, 3] = float("nan")
    with pytest.raises(ValueError, match="prompt 1: correct must be boolean"):
        make(name).step(RolloutBatch(c, GOOD_L, 4000))


@pytest.mark.parametrize("name", METHODS)
def test_float_zero_one_correctness_is_accepted_like_bool(name):
    a = make(name).step(RolloutBatch(GOOD_C, GOOD_L, 4000, **targets(name, 3, g=GOOD_C.shape[1]))).advantages
    b = make(name).step(RolloutBatch(GOOD_C.float(), GOOD_L, 4000, **targets(name, 3, g=GOOD_C.shape[1]))).advantages
    assert torch.equal(a, b)


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize("shape,match", [((0, 4), "no prompts"), ((3, 0), "empty group"), ((3, 1), "G ≥ 2")])
def test_empty_batch_empty_group_and_single_rollout_groups_are_rejected(name, shape, match):
    with pytest.raises(ValueError, match=match):
        make(name).step(RolloutBatch(torch.ones(shape, dtype=torch.bool), torch.ones(shape), 4000))


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize("field", ["lengths", "truncated", "repetitive"])
def test_mismatched_shapes_are_rejected(name, field):
    kw = {"correct": GOOD_C, "lengths": GOOD_L, "max_new_tokens": 4000}
    kw[field] = torch.ones((3, 5)) if field == "lengths" else torch.ones((2, 4), dtype=torch.bool)
    with pytest.raises(ValueError, match=f"{field} has shape"):
        make(name).step(RolloutBatch(**kw))


@pytest.mark.parametrize("name", METHODS)
def test_all_correct_and_all_wrong_batches_give_finite_defined_output(name):
    for c in (torch.ones_like(GOOD_C), torch.zeros_like(GOOD_C)):
        out = make(name).step(RolloutBatch(c, GOOD_L, 4000, **targets(name, 3, g=GOOD_C.shape[1])))
        assert torch.isfinite(out.advantages).all() and torch.isfinite(out.rewards).all()
        assert all(isinstance(v, float) for v in out.stats.values())


@pytest.mark.parametrize("name", ["grpo", "leash"])
def test_correctness_only_methods_give_zero_advantage_on_uniform_groups(name):
    out = make(name).step(RolloutBatch(torch.ones_like(GOOD_C), GOOD_L, 4000))
    assert out.advantages.abs().sum() == 0 and out.stats["zero_advantage_groups"] == 1.0


def test_bad_max_new_tokens_is_rejected():
    with pytest.raises(ValueError, match="max_new_tokens"):
        make("lead").step(RolloutBatch(GOOD_C, GOOD_L, 0))


def test_controller_state_of_another_method_is_rejected():
    with pytest.raises(ValueError, match="w_c"):
        make("lead").load_state_dict(make("leash").state_dict())


@pytest.mark.parametrize(
    "n_gold,match",
    [
        (torch.tensor([100.0, float("nan"), 300.0]), "prompt 1: n_gold must be a finite positive"),
        (torch.tensor([100.0, 200.0, 0.0]), "prompt 2: n_gold must be a finite positive"),
        (torch.tensor([100.0, 200.0]), r"n_gold has shape \(2,\), expected \[M\] = \(3,\)"),
    ],
)
def test_bad_per_prompt_target_is_a_value_error_naming_the_prompt(n_gold, match):
    batch = RolloutBatch(correct=GOOD_C, lengths=GOOD_L, max_new_tokens=4096, n_gold=n_gold)
    with pytest.raises(ValueError, match=match):
        make("grpo").step(batch)


def test_l1_max_flags_must_be_one_boolean_per_prompt():
    batch = RolloutBatch(correct=GOOD_C, lengths=GOOD_L, max_new_tokens=4096, l1_max=torch.tensor([1, 0, 2]))
    with pytest.raises(ValueError, match="prompt 2: l1_max must be boolean"):
        make("grpo").step(batch)
    batch.l1_max = torch.tensor([[True, False, True]])
    with pytest.raises(ValueError, match=r"l1_max has shape \(1, 3\), expected \[M\] = \(3,\)"):
        make("grpo").step(batch)


@pytest.mark.parametrize("name", METHODS)
def test_a_non_finite_or_misshapen_length_penalty_is_a_value_error_naming_the_prompt(name):
    penalty = torch.zeros(GOOD_C.shape)
    penalty[1, 2] = float("-inf")
    batch = RolloutBatch(correct=GOOD_C, lengths=GOOD_L, max_new_tokens=4096, length_penalty=penalty)
    with pytest.raises(ValueError, match="prompt 1: length_penalty must be finite"):
        make(name).step(batch)
    batch.length_penalty = torch.zeros(3)
    with pytest.raises(ValueError, match=r"length_penalty has shape \(3,\), expected \[M, G\] = \(3, 4\)"):
        make(name).step(batch)
