"""GRPO, scalarised GRPO, GDPO and ShorterBetter (docs/methods.md): hand-computed values."""

from __future__ import annotations

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.common import group_normalize
from lead_recipes.methods.config import RecipeConfig


def step(name, correct, lengths, cap=4000, **section):
    sec = name.replace("-", "_")
    m = build_method(RecipeConfig.of({"method": name, **({sec: section} if section else {})}))
    return m.step(
        RolloutBatch(torch.tensor(correct, dtype=torch.bool), torch.tensor(lengths, dtype=torch.float32), cap)
    )


def test_grpo_matches_openrlhf_group_norm_up_to_epsilon():
    correct = [[1, 0, 1, 1], [0, 0, 1, 0]]
    out = step("grpo", correct, [[10, 20, 30, 40]] * 2)
    r = torch.tensor(correct, dtype=torch.float32)
    stock = (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1e-9)
    assert torch.allclose(out.advantages, stock, atol=1e-5)


def test_zero_std_group_gets_exactly_zero_even_for_non_representable_rewards():
    r = torch.full((1, 8), 0.1, dtype=torch.float64)
    assert group_normalize(r).abs().sum() == 0


def test_scalarized_conditioned_length_reward_by_hand():
    out = step("grpo-scalarized", [[1, 1, 0, 0]], [[1500, 2500, 1000, 3000]])
    assert out.rewards[0].tolist() == [1.0, 0.5, 0.0, 0.0]  # 0.5·1[c] + 0.5·1[c ∧ l ≤ 2000]


def test_scalarized_classic_length_reward_ignores_correctness():
    out = step("grpo-scalarized", [[1, 1, 0, 0]], [[1500, 2500, 1000, 3000]], length_reward="classic")
    assert out.rewards[0].tolist() == [1.0, 0.5, 0.5, 0.0]


def test_gdpo_trl_adds_1e4_to_the_group_and_the_batch_std():
    # r_c = [[1, 0], [1, 1]], r_len = 1[c ∧ l ≤ 2000] = [[1, 0], [1, 0]]. A group of two with rewards 1, 0 has
    # unbiased std √0.5, so ±0.5/(√0.5 + 1e-4) = ±0.707006795; the all-correct group's r_c gives 0. Summed:
    # [2a, −2a, a, −a], batch mean 0, unbiased std 1.290811900; A = x/(1.290811900 + 1e-4)
    out = step("gdpo", [[1, 0], [1, 1]], [[100, 3000], [500, 2500]], whiten="trl")
    expected = [[1.09536026, -1.09536026], [0.54768013, -0.54768013]]
    assert out.advantages.tolist() == [pytest.approx(row, abs=1e-6) for row in expected]


def test_gdpo_lead_reward_with_static_weights_equals_lead_static():
    correct, lengths = [[1, 1, 0, 0], [0, 0, 0, 0]], [[1200, 2000, 3000, 4000], [500, 1000, 2000, 4000]]
    g = step("gdpo", correct, lengths, length_reward="lead", correct_weight=0.7, length_weight=0.3)
    m = build_method(RecipeConfig.of({"method": "lead", "lead": {"static_lambda_c": 0.7}}))
    l = m.step(RolloutBatch(torch.tensor(correct, dtype=torch.bool), torch.tensor(lengths, dtype=torch.float32), 4000))
    assert torch.allclose(g.advantages, l.advantages, atol=1e-6)


def test_shorter_better_sol_is_min_correct_length():
    out = step("shorter-better", [[1, 1, 0, 0]], [[1000, 1500, 500, 3000]])
    assert out.rewards[0].tolist() == pytest.approx([2.0, 1.5, -0.5, -2.0])
    assert out.stats["sol_mean"] == 1000.0


def test_shorter_better_unsolved_sol_is_mean_of_all_lengths():
    out = step("shorter-better", [[0, 0, 0, 0]], [[1000, 2000, 3000, 2000]])
    assert out.rewards[0].tolist() == pytest.approx([-1.0, 0.0, -1.0, 0.0])


def test_shorter_better_single_correct_rollout_gets_exactly_alpha():
    assert step("shorter-better", [[0, 1, 0]], [[10, 777, 30]]).rewards[0, 1] == 2.0


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=100, deadline=None)
@given(value=st.floats(-1e6, 1e6, allow_nan=False), g=st.integers(2, 16), m=st.integers(1, 3))
def test_all_equal_rows_of_any_value_normalise_to_exact_zero(value, g, m):
    assert group_normalize(torch.full((m, g), value, dtype=torch.float64)).abs().sum() == 0
