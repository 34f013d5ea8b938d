"""GRPO-LEAD (arXiv 2504.09696, §3): the paper's worked numbers, the weighting on the sign of the normalised
advantage, and the reference-code options (each off by default)."""

from __future__ import annotations

import math

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import GrpoLeadConfig, RecipeConfig
from lead_recipes.methods.grpo_lead import difficulty_weight, grpo_lead

CFG = GrpoLeadConfig()


def method(**kw):
    return build_method(RecipeConfig.of({"method": "grpo-lead", "grpo_lead": kw}))


def _2d(x):
    return None if x is None else (x if isinstance(x[0], list) else [x])


def run(correct, lengths, cap=8000, truncated=None, repetitive=None, think_boxed=None, **kw):
    correct, lengths, truncated, repetitive, think_boxed = map(
        _2d, (correct, lengths, truncated, repetitive, think_boxed)
    )
    b = RolloutBatch(
        torch.tensor(correct, dtype=torch.bool),
        torch.tensor(lengths, dtype=torch.float32),
        cap,
        None if truncated is None else torch.tensor(truncated),
        None if repetitive is None else torch.tensor(repetitive),
        None if think_boxed is None else torch.tensor(think_boxed),
    )
    return method(**kw).step(b)


def test_paper_worked_weights_w_7_8_and_w_2_8():
    assert float(difficulty_weight(7 / 8, CFG)) == pytest.approx(0.645, abs=5e-4)
    assert float(difficulty_weight(2 / 8, CFG)) == pytest.approx(1.493, abs=5e-4)


@pytest.mark.parametrize(
    "k,pos,neg",
    [
        (0, 1.499, 0.483),
        (1, 1.498, 0.645),
        (2, 1.493, 0.950),
        (3, 1.475, 1.255),
        (4, 1.417, 1.417),
        (5, 1.255, 1.475),
        (6, 0.950, 1.493),
        (7, 0.645, 1.498),
        (8, 0.483, 1.499),
    ],
)
def test_weight_table_of_spec_2_1(k, pos, neg):
    assert float(difficulty_weight(k / 8, CFG)) == pytest.approx(pos, abs=5e-4)
    assert float(difficulty_weight(1 - k / 8, CFG)) == pytest.approx(neg, abs=5e-4)


def test_correct_rewards_lie_in_0_84_to_1_10_for_z_in_minus2_to_3_5():
    z = torch.linspace(-2, 3.5, 56, dtype=torch.float64)
    r = torch.exp(-CFG.alpha * z)
    assert float(r.min()) == pytest.approx(0.839, abs=1e-3) and float(r.max()) == pytest.approx(1.105, abs=1e-3)
    assert 0.83 < float(r.min()) and float(r.max()) < 1.11


def test_shaped_correct_reward_is_exp_of_minus_alpha_z_with_unbiased_sigma():
    lengths = [1000, 2000, 3000, 500, 500, 500, 500, 500]
    out = run([1, 1, 1, 0, 0, 0, 0, 0], lengths)
    mu, sigma = 2000.0, 1000.0  # unbiased std of (1000, 2000, 3000)
    expected = [math.exp(-0.05 * (l - mu) / (sigma + 1e-6)) for l in lengths[:3]]
    assert out.rewards[0, :3].tolist() == pytest.approx(expected, rel=1e-6)
    assert out.rewards[0, 3:].tolist() == [-1.0] * 5


@pytest.mark.parametrize("k", range(0, 9))
def test_expected_reward_sign_flips_at_p_correct_one_half(k):
    out = run([[1] * k + [0] * (8 - k)], [[700] * 8])
    mean = float(out.rewards.mean())
    assert (mean > 0) == (k > 4) and (mean < 0) == (k < 4) and (mean == 0) == (k == 4)


def test_positive_advantages_get_w_rho_and_negative_get_w_one_minus_rho():
    correct = [1, 1, 0, 0, 0, 0, 0, 0]
    out = run(correct, [900, 900, 100, 200, 300, 400, 500, 600])
    r = torch.tensor([1.0, 1.0] + [-1.0] * 6, dtype=torch.float64)
    a = (r - r.mean()) / (r.std() + 1e-6)
    w_pos, w_neg = float(difficulty_weight(0.25, CFG)), float(difficulty_weight(0.75, CFG))
    assert out.advantages[0, :2].tolist() == pytest.approx((a[:2] * w_pos).tolist(), rel=1e-6)
    assert out.advantages[0, 2:].tolist() == pytest.approx((a[2:] * w_neg).tolist(), rel=1e-6)


def test_one_correct_rollout_gets_reward_one_paper_and_sigma_one_option_agree():
    args = ([0, 1, 0, 0], [100, 3000, 200, 300])
    assert run(*args).rewards[0, 1] == 1.0
    assert run(*args, ref_code_sigma_one_enable=True).rewards[0, 1] == 1.0


def test_all_wrong_group_has_zero_advantage_and_all_correct_equal_lengths_too():
    out = run([[0] * 4, [1] * 4], [[100, 200, 300, 400], [500] * 4])
    assert out.advantages.abs().sum() == 0


def test_truncated_response_gets_minus_one_even_if_graded_correct():
    out = run([1, 1, 1, 0], [100, 200, 8000, 300])
    assert out.rewards[0, 2] == -1.0


def test_ref_code_format_failure_option_follows_the_code_remap():
    # r0 graded correct, </think> and a box before it, cut in its answer: correct (z = 0 ⇒ 1); r1 a completed wrong
    # answer, repetitive: −1 (the code's −2 hits format failures only); r2 a repetitive format failure: −2; r3 a
    # format failure: 0; r4 graded correct but no box before </think>: a format failure, 0.
    # R = [1, −1, −2, 0, 0]: mean −0.4, unbiased std 1.140175; ρ = 1/5, w(0.2) = 1.495523, w(0.8) = 0.815295
    out = run(
        [1, 0, 0, 0, 1],
        [300, 400, 500, 600, 700],
        truncated=[1, 0, 0, 0, 0],
        repetitive=[0, 1, 1, 0, 0],
        think_boxed=[1, 1, 0, 0, 0],
        ref_code_format_failure_enable=True,
        repetition_penalty_enable=True,
        repetition_reward=-2.0,
    )
    assert out.rewards[0].tolist() == [1.0, -1.0, -2.0, 0.0, 0.0]
    assert out.advantages[0].tolist() == pytest.approx([1.836323, -0.429036, -1.144096, 0.524664, 0.524664], abs=1e-5)
    assert out.stats["repetition_penalised_frac"] == pytest.approx(0.2)


def test_ref_code_format_failure_without_flags_is_a_clear_error():
    with pytest.raises(ValueError, match="think_boxed"):
        run([1, 0], [100, 200], ref_code_format_failure_enable=True)


def test_repetition_penalty_applies_to_incorrect_repetitive_only():
    out = run([1, 0, 0, 1], [100, 200, 300, 400], repetitive=[True, True, False, False], repetition_penalty_enable=True)
    assert out.rewards[0].tolist()[1:3] == [-1.5, -1.0] and out.rewards[0, 0] > 0
    code = run(
        [1, 0, 0, 1],
        [100, 200, 300, 400],
        repetitive=[True, True, False, False],
        repetition_penalty_enable=True,
        repetition_reward=-2.0,
    )
    assert code.rewards[0, 1] == -2.0


def test_repetition_penalty_without_flags_is_a_clear_error():
    with pytest.raises(ValueError, match="repetition"):
        run([1, 0], [100, 200], repetition_penalty_enable=True)


def test_ref_code_length_gate_keeps_reward_one_below_4000_tokens():
    lengths = [1000, 2000, 3000, 3500]
    assert run([1, 1, 1, 0], lengths, ref_code_length_gate_enable=True).rewards[0, :3].tolist() == [1.0] * 3
    long = [4500, 5000, 6000, 7000]
    gated = run([1, 1, 1, 0], long, ref_code_length_gate_enable=True).rewards
    assert gated[0, :3].tolist() == run([1, 1, 1, 0], long).rewards[0, :3].tolist() and gated[0, 0] > 1


def test_ref_code_rejection_zeroes_no_positive_and_all_exactly_one_groups_only():
    boxed = [[False, True, True, True], [True] * 4, [True] * 4]  # row 0: one format failure (0) among wrong (−1)
    out = run(
        [[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]],
        [[100, 200, 300, 400], [500] * 4, [100, 200, 300, 400]],
        think_boxed=boxed,
        ref_code_rejection_enable=True,
        ref_code_format_failure_enable=True,
    )
    assert out.advantages[0].abs().sum() == 0 and out.advantages[1].abs().sum() == 0
    assert out.advantages[2].abs().sum() > 0 and out.stats["rejected_groups"] == 2.0
    # without the option the mixed 0/−1 group keeps its nonzero advantages (the authors' code)
    kept = run([[0, 0, 0, 0]], [[100, 200, 300, 400]], think_boxed=boxed[:1], ref_code_format_failure_enable=True)
    assert kept.advantages.abs().sum() > 0


def test_pure_function_matches_method_output():
    c = torch.tensor([[1, 0, 1, 1]], dtype=torch.bool)
    l = torch.tensor([[100.0, 200.0, 300.0, 900.0]], dtype=torch.float64)
    r, a, _ = grpo_lead(c, l, torch.zeros_like(c), None, CFG)
    out = run(c.tolist(), l.tolist())
    assert torch.equal(out.advantages, a.float()) and torch.equal(out.rewards, r.float())
