"""Arora–Zanette, L1-Exact, L1-Max, Kimi k1.5 and ThinkPrune (docs/methods.md#length-baselines): the hand-computed
golden groups of the baselines spec (§8, G1–G6; rewards to 1e-6, advantages to 1e-5), each code-behaviour option's
golden columns, and the edge cases the spec lists."""

from __future__ import annotations

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.arora_zanette import fork_whiten, rloo
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig


def step(name, correct, lengths, truncated, cap=4096, n_gold=None, l1_max=None, **section):
    sec = name.replace("-", "_")
    m = build_method(RecipeConfig.of({"method": name, **({sec: section} if section else {})}))
    return m.step(
        RolloutBatch(
            torch.tensor(correct, dtype=torch.bool),
            torch.tensor(lengths, dtype=torch.float32),
            cap,
            truncated=torch.tensor(truncated, dtype=torch.bool),
            n_gold=None if n_gold is None else torch.tensor(n_gold, dtype=torch.float32),
            l1_max=None if l1_max is None else torch.tensor(l1_max, dtype=torch.bool),
        )
    )


def close(got, want, atol):
    assert got.shape == (len(want),) and torch.allclose(
        got.double(), torch.tensor(want, dtype=torch.float64), atol=atol
    )


# ------------------------------------------------------------------------------------------- §8 golden groups
G1 = dict(correct=[[1, 1, 1, 0]], lengths=[[1000, 2000, 3000, 1500]], truncated=[[0, 0, 0, 0]])
G2 = dict(correct=[[1, 0, 1, 0]], lengths=[[1200, 800, 4096, 2000]], truncated=[[0, 0, 1, 0]])


def test_arora_g1_three_correct_one_wrong():
    out = step("arora-zanette", **G1)
    close(out.rewards[0], [0.977290, 0.950000, 0.922710, 0.0], 1e-6)
    close(out.advantages[0], [0.556839, 0.499450, 0.442061, -1.498349], 1e-5)


def test_arora_g2_one_valid_correct_gets_one_minus_half_alpha_and_truncated_correct_gets_zero():
    out = step("arora-zanette", **G2)
    close(out.rewards[0], [0.95, 0.0, 0.0, 0.0], 1e-6)
    close(out.advantages[0], [1.499997, -0.499999, -0.499999, -0.499999], 1e-5)


@pytest.mark.parametrize("group,want", [(G1, [0.353053, 0.316667, 0.280280, -0.95]), (G2, [0.95] + [-0.316667] * 3)])
def test_arora_rloo_before_whitening_matches_the_golden_column(group, want):
    r = step("arora-zanette", **group).rewards.double()
    close(rloo(r)[0], want, 1e-6)


def test_arora_ref_code_rloo_whiten_is_rloo_then_token_weighted_batch_whitening():
    batch = dict(
        correct=G1["correct"] + G2["correct"],
        lengths=G1["lengths"] + G2["lengths"],
        truncated=G1["truncated"] + G2["truncated"],
    )
    out = step("arora-zanette", **batch, ref_code_rloo_whiten_enable=True)
    lengths = torch.tensor(batch["lengths"], dtype=torch.float64)
    pre = torch.tensor(
        [[0.353053, 0.316667, 0.280280, -0.95], [0.95, -0.316667, -0.316667, -0.316667]], dtype=torch.float64
    )
    w = lengths / lengths.sum()
    mean = (w * pre).sum()
    var = (lengths * (pre - mean) ** 2).sum() / lengths.sum()  # population variance over tokens (the fork)
    want = (pre - mean) / var.clamp(min=1e-8).sqrt()
    assert torch.allclose(out.advantages.double(), want, atol=1e-5)


def test_arora_ref_code_whitening_uses_the_population_variance():
    # one token each: R = [0.95, 0] (one correct ⇒ 1 − α/2), RLOO = [0.95, −0.95], token mean 0, population
    # variance 0.9025 ⇒ A = ±1 (the unbiased variance over 2 tokens, 1.805, would give ±0.707107)
    out = step("arora-zanette", [[1, 0]], [[1, 1]], [[0, 0]], ref_code_rloo_whiten_enable=True)
    close(out.advantages[0], [1.0, -1.0], 1e-6)


def test_arora_ref_code_whitening_clamps_the_variance_at_1e8_rather_than_adding_it():
    # a = ±1e-4 on one token each: variance 1e-8 = the clamp ⇒ A = ±1 (adding 1e-8 would give ±0.707107)
    got = fork_whiten(torch.tensor([[1e-4, -1e-4]], dtype=torch.float64), torch.tensor([[1.0, 1.0]]).double())
    close(got[0], [1.0, -1.0], 1e-9)
    zero = fork_whiten(torch.zeros(2, 2, dtype=torch.float64), torch.tensor([[5.0, 7.0], [3.0, 2.0]]).double())
    assert zero.abs().sum() == 0  # variance 0 ⇒ clamp(0, 1e-8): finite, 0


def test_arora_sample_std_option_uses_the_unbiased_std_of_the_correct_lengths():
    out = step("arora-zanette", **G1, std="sample")  # sample std of 1000, 2000, 3000 = 1000
    want = [1 - 0.1 * torch.sigmoid(torch.tensor(z)).item() for z in (-1.0, 0.0, 1.0)] + [0.0]
    close(out.rewards[0], want, 1e-6)


def test_arora_grade_truncated_option_counts_the_truncated_correct_answer_in_the_statistics():
    out = step("arora-zanette", **G2, grade_truncated_enable=True)  # C = {1200, 4096}: z = ∓1 ⇒ σ(∓1)
    s = torch.sigmoid(torch.tensor([-1.0, 1.0]))
    close(out.rewards[0], [1 - 0.1 * s[0].item(), 0.0, 1 - 0.1 * s[1].item(), 0.0], 1e-6)


G3 = dict(correct=[[1, 1, 0, 0]], lengths=[[1800, 2600, 2000, 4096]], truncated=[[0, 0, 0, 1]], n_gold=[2000])


def test_l1_exact_g3_paper_alpha():
    out = step("l1-exact", **G3)
    close(out.rewards[0], [0.94, 0.82, 0.0, -0.6288], 1e-6)
    close(out.advantages[0], [0.891181, 0.728458, -0.383484, -1.236154], 1e-5)


def test_l1_exact_g3_original_release_alpha_one_over_3000():
    out = step("l1-exact", **G3, alpha=1 / 3000)
    close(out.rewards[0], [0.933333, 0.8, 0.0, -0.698667], 1e-6)
    close(out.advantages[0], [0.888022, 0.712524, -0.340467, -1.260079], 1e-5)


G4 = dict(correct=[[1, 1, 1, 0]], lengths=[[1200, 2000, 2300, 900]], truncated=[[0, 0, 0, 0]], n_gold=[2000])


def test_l1_max_g4():
    out = step("l1-max", **G4, l1_max=[True])
    close(out.rewards[0], [1.0, 0.5, 0.2, 0.0], 1e-6)
    close(out.advantages[0], [1.322040, 0.172440, -0.517320, -0.977160], 1e-5)


def test_l1_max_dual_objective_rewards_exact_prompts_by_eq_1_and_max_prompts_by_eq_2():
    out = step(
        "l1-max",
        correct=G4["correct"] + G3["correct"],
        lengths=G4["lengths"] + G3["lengths"],
        truncated=G4["truncated"] + G3["truncated"],
        n_gold=[2000, 2000],
        l1_max=[True, False],
    )
    close(out.rewards[0], [1.0, 0.5, 0.2, 0.0], 1e-6)
    close(out.rewards[1], [0.94, 0.82, 0.0, -0.6288], 1e-6)  # --recipe.l1_exact.alpha, the paper's 0.0003
    close(out.advantages[1], [0.891181, 0.728458, -0.383484, -1.236154], 1e-5)


G5 = dict(correct=[[1, 1, 0, 0]], lengths=[[1000, 3000, 2000, 5000]], truncated=[[0, 0, 0, 1]], cap=5000)


def test_kimi_g5_weight_0_4():
    out = step("kimi", **G5)
    close(out.rewards[0], [1.2, 1.0, 0.0, -0.2], 1e-6)
    close(out.advantages[0], [0.996614, 0.711867, -0.711867, -0.996614], 1e-5)


def test_kimi_g5_weight_1():
    out = step("kimi", **G5, weight=1.0)
    close(out.rewards[0], [1.5, 1.0, 0.0, -0.5], 1e-6)
    close(out.advantages[0], [1.095444, 0.547722, -0.547722, -1.095444], 1e-5)


def test_kimi_equal_lengths_give_no_length_reward():
    out = step("kimi", correct=[[1, 0, 1, 0]], lengths=[[1500] * 4], truncated=[[0] * 4])
    close(out.rewards[0], [1.0, 0.0, 1.0, 0.0], 1e-6)
    close(out.advantages[0], [0.866024, -0.866024, 0.866024, -0.866024], 1e-5)
    assert out.stats["length_reward_mean"] == 0.0


def test_kimi_mean_baseline_option_is_reward_minus_group_mean_without_std():
    out = step("kimi", **G5, estimator="mean_baseline")
    close(out.advantages[0], [1.2 - 0.5, 1.0 - 0.5, 0.0 - 0.5, -0.2 - 0.5], 1e-6)


def test_kimi_warmup_steps_shape_by_correctness_alone_then_switch_the_penalty_on():
    m = build_method(RecipeConfig.of({"method": "kimi", "kimi": {"warmup_steps": 2}}))
    batch = RolloutBatch(
        torch.tensor(G5["correct"], dtype=torch.bool),
        torch.tensor(G5["lengths"], dtype=torch.float32),
        5000,
        truncated=torch.tensor(G5["truncated"], dtype=torch.bool),
    )
    rewards = [m.step(batch).rewards[0].tolist() for _ in range(3)]
    assert rewards[:2] == [[1.0, 1.0, 0.0, 0.0]] * 2
    assert rewards[2] == pytest.approx([1.2, 1.0, 0.0, -0.2], abs=1e-6)
    assert m.state_dict() == {"step": 3}


G6 = dict(correct=[[1, 1, 1, 0]], lengths=[[1500, 2999, 3000, 800]], truncated=[[0, 0, 1, 0]], cap=3000)


def test_thinkprune_g6_paper_truncated_gets_zero_with_the_rollout_cap_as_limit():
    out = step("thinkprune", **G6)
    close(out.rewards[0], [1.0, 1.0, 0.0, 0.0], 1e-6)
    close(out.advantages[0], [0.866024, 0.866024, -0.866024, -0.866024], 1e-5)
    assert out.stats["limit"] == 3000.0


def test_thinkprune_g6_code_option_grades_the_truncated_text():
    out = step("thinkprune", **G6, ref_code_grade_truncated_enable=True)
    close(out.rewards[0], [1.0, 1.0, 1.0, 0.0], 1e-6)
    close(out.advantages[0], [0.499999, 0.499999, 0.499999, -1.499997], 1e-5)


# -------------------------------------------------------------------------------------------- spec edge cases
def test_arora_no_correct_rollout_gives_zero_rewards_and_advantages():
    out = step("arora-zanette", correct=[[0, 0, 1, 0]], lengths=[[10, 20, 4096, 40]], truncated=[[0, 0, 1, 0]])
    assert out.rewards.abs().sum() == 0 and out.advantages.abs().sum() == 0


def test_arora_all_correct_with_equal_lengths_gives_one_minus_half_alpha_and_zero_advantage():
    out = step("arora-zanette", correct=[[1] * 4], lengths=[[1234] * 4], truncated=[[0] * 4])
    close(out.rewards[0], [0.95] * 4, 1e-7)
    assert out.advantages.abs().sum() == 0


@pytest.mark.parametrize("std", ["population", "sample"])
def test_arora_single_correct_rollout_gets_one_minus_half_alpha_for_either_std(std):
    out = step("arora-zanette", correct=[[0, 1, 0]], lengths=[[5, 777, 9]], truncated=[[0, 0, 0]], std=std)
    assert out.rewards[0].tolist() == pytest.approx([0.0, 0.95, 0.0], abs=1e-7)


def test_arora_group_statistics_are_per_group_even_for_identical_groups():
    one = step("arora-zanette", **G1)
    two = step("arora-zanette", correct=G1["correct"] * 2, lengths=G1["lengths"] * 2, truncated=G1["truncated"] * 2)
    assert torch.equal(two.rewards[1], one.rewards[0]) and torch.equal(two.advantages[0], one.advantages[0])


def test_l1_exact_wrong_answer_still_pays_the_length_distance():
    out = step("l1-exact", correct=[[0, 0]], lengths=[[1000, 3000]], truncated=[[0, 0]], n_gold=[2000])
    close(out.rewards[0], [-0.3, -0.3], 1e-6)


@pytest.mark.parametrize("length,want", [(1500, 1.0), (1000, 1.0), (2000, 0.5), (2500, 0.0), (3000, 0.0), (1750, 0.75)])
def test_l1_max_clip_saturates_500_tokens_either_side_of_the_target(length, want):
    out = step("l1-max", correct=[[1, 0]], lengths=[[length, 10]], truncated=[[0, 0]], n_gold=[2000], l1_max=[True])
    assert out.rewards[0, 0].item() == pytest.approx(want, abs=1e-7)


def test_l1_max_all_correct_far_under_budget_get_zero_advantage():
    out = step(
        "l1-max", correct=[[1] * 4], lengths=[[100, 300, 900, 1400]], truncated=[[0] * 4], n_gold=[2000], l1_max=[True]
    )
    assert out.rewards[0].tolist() == [1.0] * 4 and out.advantages.abs().sum() == 0


def test_l1_truncated_correct_text_is_incorrect_but_exact_keeps_its_length_term():
    kw = dict(correct=[[1, 1]], lengths=[[4096, 2000]], truncated=[[1, 0]], n_gold=[2000])
    close(step("l1-exact", **kw).rewards[0], [-0.6288, 1.0], 1e-6)
    close(step("l1-max", **kw, l1_max=[True]).rewards[0], [0.0, 0.5], 1e-6)


@pytest.mark.parametrize("name", ["l1-exact", "l1-max"])
def test_l1_without_targets_is_a_value_error_saying_the_data_needs_n_gold(name):
    with pytest.raises(ValueError, match=r"n_gold.*lead-recipes data build"):
        step(name, **G1)


def test_l1_max_without_the_prompt_mode_is_a_value_error():
    with pytest.raises(ValueError, match="l1_max"):
        step("l1-max", **G4)


def test_l1_exact_refuses_a_prompt_that_asks_for_a_maximum():
    with pytest.raises(ValueError, match="prompt 1 asks for at most 2000 tokens.*l1-max"):
        step(
            "l1-exact",
            correct=[[1, 0]] * 2,
            lengths=[[5, 6]] * 2,
            truncated=[[0, 0]] * 2,
            n_gold=[100, 2000],
            l1_max=[False, True],
        )


def test_kimi_ties_at_the_shortest_length_each_get_half_and_wrong_short_gets_nothing():
    out = step("kimi", correct=[[1, 1, 0, 0]], lengths=[[100, 100, 100, 300]], truncated=[[0] * 4], weight=1.0)
    close(out.rewards[0], [1.5, 1.5, 0.0, -0.5], 1e-6)


def test_thinkprune_limit_below_the_cap_zeroes_finished_answers_over_it():
    out = step("thinkprune", correct=[[1, 1, 1, 0]], lengths=[[1999, 2000, 2001, 10]], truncated=[[0] * 4], limit=2000)
    close(out.rewards[0], [1.0, 1.0, 0.0, 0.0], 1e-6)
    assert out.stats["over_limit_frac"] == 0.25


def test_thinkprune_eos_as_the_last_allowed_token_is_not_truncated():
    out = step("thinkprune", correct=[[1, 0]], lengths=[[3000, 10]], truncated=[[0, 0]], cap=3000)
    assert out.rewards[0].tolist() == [1.0, 0.0]
