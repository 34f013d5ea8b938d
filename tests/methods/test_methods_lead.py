"""LEAD (arXiv 2605.09806, Eqs. 2–9; docs/methods.md): hand-computed L*_q, r_l, the Law-of-Total-Variance statistics
with correct-only masking, CṼ, P, Ψ,
the EMA, the floor, the Ψ_c = Ψ_l = 0 decay (and our skip option), the reference code's L* modes, and
token-weighted BatchWhiten against an explicit per-token reference."""

from __future__ import annotations

import math

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import LeadConfig, RecipeConfig
from lead_recipes.methods.lead import efficiency_reward, length_reward, psi_statistics, target_lengths


def T(x, dtype=torch.float64):
    return torch.tensor(x, dtype=dtype)


def B(x):
    return torch.tensor(x, dtype=torch.bool)


def lead(**kw):
    return build_method(RecipeConfig.of({"method": "lead", "lead": kw}))


def batch(correct, lengths, cap=4000):
    return RolloutBatch(B(correct), T(lengths, torch.float32), cap)


@pytest.mark.parametrize(
    "agg,expected",
    [("mean_correct", 2500.0), ("min_correct", 1500.0), ("median_correct", 2500.0), ("mean_all", 1900.0)],
)
def test_target_length_per_aggregator(agg, expected):
    got = target_lengths(B([[1, 1, 1, 0]]), T([[1500, 3500, 2500, 100]]), 4000, agg, 1000)
    assert got.tolist() == [expected]


def test_median_of_even_count_is_mean_of_two_middle_values():
    got = target_lengths(B([[1, 1, 1, 1, 0]]), T([[3000, 1200, 2000, 1600, 50]]), 4000, "median_correct", 1000)
    assert got.tolist() == [1800.0]


@pytest.mark.parametrize("agg", ["mean_correct", "min_correct", "median_correct"])
def test_unsolved_prompt_gets_the_b_max_sentinel(agg):
    assert target_lengths(B([[0, 0, 0]]), T([[100, 200, 300]]), 4000, agg, 1000).tolist() == [4000.0]


def test_sentinel_is_b_max_unclamped_when_b_max_is_below_l_min():
    # B_max = 800 < L_min = 1000: the solved prompt's L* is max(min(600, 800), 1000) = 1000, the unsolved one's
    # the sentinel 800 itself (Eq. 8, reference code); its r_l = l/800 = [0.25, 0.5, 1.0]
    correct, lengths = B([[1, 0, 0], [0, 0, 0]]), T([[600, 700, 800], [200, 400, 800]])
    assert target_lengths(correct, lengths, 800, "mean_correct", 1000).tolist() == [1000.0, 800.0]
    r_l, _ = length_reward(correct, lengths, 800, LeadConfig())
    assert r_l[1].tolist() == pytest.approx([0.25, 0.5, 1.0])


def test_mean_all_never_uses_the_sentinel():
    assert target_lengths(B([[0, 0, 0]]), T([[1000, 2000, 3000]]), 4000, "mean_all", 1000).tolist() == [2000.0]


def test_l_min_clamps_short_targets_up_and_b_max_clamps_long_ones_down():
    assert target_lengths(B([[1, 1, 0]]), T([[300, 800, 3000]]), 4000, "min_correct", 1000).tolist() == [1000.0]
    assert target_lengths(B([[1, 1]]), T([[3000, 4000]]), 2000, "mean_correct", 1000).tolist() == [2000.0]


def test_efficiency_reward_is_symmetric_and_clipped_at_minus_one():
    r = efficiency_reward(T([[400, 1600, 2000, 2800, 4800, 8000]]), T([1600]))
    assert r[0].tolist() == pytest.approx([0.25, 1.0, 0.75, 0.25, -1.0, -1.0])


MODE_CORRECT, MODE_LENGTHS = [[1, 1, 1, 0, 0]], [[400, 800, 1600, 1000, 3000]]  # L* = max(933.3, L_min) = 1000


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("max_sym", [0.4, 0.8, 0.4, 1.0, -1.0]),
        # correct: 400 < 500 ⇒ 0, max(0, 1 − 0.8) = 0.2, max(0, −0.6) = 0; incorrect: min(0, 0) = 0, max(−1, −2) = −1
        ("ref_code_max_asym", [0.0, 0.2, 0.0, 0.0, -1.0]),
        ("ref_code_upper_only", [0.0, 0.0, -0.6, 0.0, -1.0]),
    ],
)
def test_length_mode_gives_the_reference_code_rewards(mode, expected):
    r_l, target = length_reward(B(MODE_CORRECT), T(MODE_LENGTHS), 4000, LeadConfig(length_mode=mode))
    assert target.tolist() == [1000.0]
    assert r_l[0].tolist() == pytest.approx(expected, abs=1e-12)


def test_max_asym_floor_is_a_setting():
    cfg = LeadConfig(length_mode="ref_code_max_asym", ref_code_asym_floor_tokens=300.0)
    r_l, _ = length_reward(B(MODE_CORRECT), T(MODE_LENGTHS), 4000, cfg)
    assert r_l[0, 0].item() == pytest.approx(0.6)  # 400 ≥ 300: max(0, 1 − 400/1000)


def test_unsolved_prompt_efficiency_reward_is_l_over_b_max():
    m = lead()
    out = m.step(batch([[0, 0, 0, 0], [1, 0, 1, 0]], [[500, 1000, 2000, 4000], [1200, 100, 2000, 300]]))
    # reward reported = λ_c r_c + λ_l r_l with r_c = 0 for the unsolved prompt
    lam_l = m.controller.lambda_l
    assert out.rewards[0].tolist() == pytest.approx([lam_l * x for x in (0.125, 0.25, 0.5, 1.0)], rel=1e-6)


def test_flat_unsolved_option_gives_an_all_wrong_group_one_advantage_and_leaves_solved_groups_ordered_alike():
    correct, lengths = [[0, 0, 0, 0], [1, 0, 1, 0]], [[500, 1000, 2000, 4000], [1200, 100, 2000, 300]]
    sentinel, flat = lead().step(batch(correct, lengths)), lead(unsolved_length="flat").step(batch(correct, lengths))
    a_sent, a_flat = sentinel.advantages[0].tolist(), flat.advantages[0].tolist()
    assert a_sent == sorted(a_sent) and a_sent[0] < a_sent[-1]  # the sentinel pays the longest answer most
    assert max(a_flat) - min(a_flat) < 1e-9  # ours: no length signal at all there
    # solved groups see the same PSI statistics and the same pre-whitening advantages: only the affine whitening
    # map over the batch differs, so their order is the same
    assert flat.stats["psi_l"] == sentinel.stats["psi_l"]
    assert flat.advantages[1].argsort().tolist() == sentinel.advantages[1].argsort().tolist()


def test_flat_unsolved_option_changes_nothing_when_every_group_is_solved():
    correct, lengths = [[1, 0, 0, 0], [1, 0, 1, 0]], [[500, 1000, 2000, 4000], [1200, 100, 2000, 300]]
    a, b = lead().step(batch(correct, lengths)), lead(unsolved_length="flat").step(batch(correct, lengths))
    assert torch.equal(a.advantages, b.advantages) and torch.equal(a.rewards, b.rewards)


HAND_CORRECT = [[1, 1, 0, 0], [0, 0, 0, 0]]
HAND_LENGTHS = [[1200, 2000, 3000, 4000], [500, 1000, 2000, 4000]]


def hand_psi():
    """LEAD's statistics by hand for HAND_*: prompt 0 L* = 1600, r_l = (.75, .75, .125, −.5); prompt 1 unsolved."""
    mu_c = 0.25  # prompt means 0.5 and 0
    sigma_c = math.sqrt((0.25 + 0) / 2 + ((0.25) ** 2 + (0.25) ** 2) / 2 + 1e-8)
    mu_l, sigma_l = 0.75, math.sqrt(0 + 0 + 1e-8)  # only prompt 0, correct rollouts only: (.75, .75)
    cv_c, cv_l = sigma_c / (mu_c + 1e-8), sigma_l / (mu_l + 1e-8)
    cvt_c, cvt_l = cv_c / (cv_c + cv_l + 1e-8), cv_l / (cv_c + cv_l + 1e-8)
    p_c, p_l = 1 - mu_c, (1 - mu_l) / 2
    return dict(
        mu_c=mu_c,
        sigma_c=sigma_c,
        mu_l=mu_l,
        sigma_l=sigma_l,
        cv_c=cv_c,
        cv_l=cv_l,
        cvt_c=cvt_c,
        cvt_l=cvt_l,
        potential_c=p_c,
        potential_l=p_l,
        psi_c=cvt_c * p_c,
        psi_l=cvt_l * p_l,
    )


def test_ltv_statistics_cv_potential_and_psi_by_hand():
    correct, lengths = B(HAND_CORRECT), T(HAND_LENGTHS)
    r_l = efficiency_reward(lengths, target_lengths(correct, lengths, 4000, "mean_correct", 1000))
    assert r_l[0].tolist() == pytest.approx([0.75, 0.75, 0.125, -0.5])
    got = psi_statistics(correct, r_l, alpha=1.0)
    for k, v in hand_psi().items():
        assert got[k] == pytest.approx(v, rel=1e-12), k
    assert got["solved_prompts"] == 1.0


def test_efficiency_statistics_ignore_incorrect_rollouts():
    correct, lengths = B(HAND_CORRECT), T(HAND_LENGTHS)
    r_l = efficiency_reward(lengths, target_lengths(correct, lengths, 4000, "mean_correct", 1000))
    changed = r_l.clone()
    changed[0, 2:] = T([-1.0, 0.9])  # incorrect rollouts of the solved prompt
    changed[1] = T([0.1, -0.3, 0.7, 0.2])  # the unsolved prompt
    a, b = psi_statistics(correct, r_l, 1.0), psi_statistics(correct, changed, 1.0)
    assert (a["mu_l"], a["sigma_l"]) == (b["mu_l"], b["sigma_l"])


def test_each_solved_prompt_weighs_equally_in_mu_l_whatever_its_correct_count():
    correct = B([[1, 1, 1, 0], [1, 0, 0, 0]])
    r_l = T([[0.2, 0.2, 0.2, 0.0], [1.0, 0.0, 0.0, 0.0]])
    got = psi_statistics(correct, r_l, 1.0)
    assert got["mu_l"] == pytest.approx(0.6) and got["sigma_l"] == pytest.approx(math.sqrt(0.16 + 1e-8))


def test_first_step_ema_weights_and_floor_by_hand():
    m = lead()
    out = m.step(batch(HAND_CORRECT, HAND_LENGTHS))
    h = hand_psi()
    t_c = h["psi_c"] / (h["psi_c"] + h["psi_l"] + 1e-8)
    w_c = 0.95 * 0.5 + 0.05 * t_c
    assert out.stats["target_lambda_c"] == pytest.approx(t_c, rel=1e-12)
    assert m.controller.w_c == pytest.approx(w_c, rel=1e-12)
    assert m.controller.lambda_c == pytest.approx(max(w_c, 0.3), rel=1e-12)
    assert m.controller.lambda_l == pytest.approx(1 - max(w_c, 0.3), rel=1e-12)


def test_floor_applies_to_lambda_c_but_the_stored_ema_state_stays_unfloored():
    m = lead()
    b = batch([[1, 1, 1, 1], [1, 1, 1, 1]], [[1000, 2000, 3000, 4000], [1500, 1500, 2500, 3900]])
    for _ in range(30):  # μ_c = 1 ⇒ P_c = 0 ⇒ λ̂ = (0, 1): w_c decays as 0.5·0.95^t
        out = m.step(b)
    assert m.controller.w_c == pytest.approx(0.5 * 0.95**30, rel=1e-6) and m.controller.w_c < 0.3
    assert out.stats["lambda_c"] == 0.3 and out.stats["lambda_l"] == pytest.approx(0.7)


def degenerate_batch():
    # all correct (P_c = 0) and every rollout exactly at its L* (r_l = 1 ⇒ μ_l = 1 ⇒ P_l = 0): Ψ_c = Ψ_l = 0
    return batch([[1, 1, 1, 1], [1, 1, 1, 1]], [[2000] * 4, [3000] * 4])


def test_psi_both_zero_decays_the_ema_toward_zero_by_default():
    # Eq. 7: λ̂ = Ψ/(Ψ_c + Ψ_l + ε) = (0, 0), so w = 0.95·(0.5, 0.5) = (0.475, 0.475); λ_c = max(0.475, 0.3)
    m = lead()
    out = m.step(degenerate_batch())
    assert out.stats["psi_c"] == 0 and out.stats["psi_l"] == 0 and out.stats["ema_skipped"] == 0.0
    assert (m.controller.w_c, m.controller.w_l, m.controller.step) == (0.95 * 0.5, 0.95 * 0.5, 1)
    assert (out.stats["lambda_c"], out.stats["lambda_l"]) == (0.475, pytest.approx(0.525))


def test_zero_psi_skip_option_keeps_the_previous_weights():
    m = lead(zero_psi_skip_enable=True)
    out = m.step(degenerate_batch())
    assert out.stats["ema_skipped"] == 1.0
    assert (m.controller.w_c, m.controller.w_l, m.controller.step) == (0.5, 0.5, 1)


def test_no_correct_rollout_in_batch_sends_target_to_correctness():
    out = lead().step(batch([[0, 0, 0, 0], [0, 0, 0, 0]], [[100, 200, 300, 400], [500, 600, 700, 800]]))
    assert out.stats["mu_l"] == 0 and out.stats["sigma_l"] == 0 and out.stats["psi_l"] == 0
    assert out.stats["target_lambda_c"] == pytest.approx(1.0, abs=1e-6)


def test_static_lambda_ablation_never_moves_the_weights():
    m = lead(static_lambda_c=0.8)
    for _ in range(3):
        out = m.step(batch(HAND_CORRECT, HAND_LENGTHS))
    assert (out.stats["lambda_c"], out.stats["lambda_l"]) == (0.8, pytest.approx(0.2))
    assert (m.controller.w_c, m.controller.w_l) == (0.5, 0.5)


def test_token_weighted_whitening_equals_verl_masked_whiten_on_broadcast_tokens():
    correct, lengths = HAND_CORRECT, [[1200, 2000, 3000, 4000], [500, 1000, 2000, 3999]]
    m = lead(static_lambda_c=0.6)
    out = m.step(batch(correct, lengths))
    # reference: broadcast the pre-whitening advantage over each response's tokens, verl masked_whiten
    rc, L = T(correct), T(lengths)
    tgt = target_lengths(B(correct), L, 4000, "mean_correct", 1000)
    rl = efficiency_reward(L, tgt)

    def gn(r):
        return torch.nan_to_num((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6))

    pre = 0.6 * gn(rc) + 0.4 * gn(rl)
    width = 4000
    mask = (torch.arange(width).unsqueeze(0) < L.reshape(-1, 1)).double()
    vals = pre.reshape(-1, 1).expand(-1, width) * mask
    mean = (vals * mask).sum() / mask.sum()
    var = (((vals - mean) ** 2) * mask).sum() / mask.sum() * (mask.sum() / (mask.sum() - 1))
    white = ((vals - mean) * torch.rsqrt(var + 1e-8))[:, 0].reshape(2, 4)
    assert torch.allclose(out.advantages.double(), white, rtol=1e-5, atol=1e-6)


def test_token_weighting_differs_from_sequence_whitening_when_lengths_differ():
    a = lead(static_lambda_c=0.6).step(batch(HAND_CORRECT, HAND_LENGTHS)).advantages
    b = lead(static_lambda_c=0.6, whiten="sequence").step(batch(HAND_CORRECT, HAND_LENGTHS)).advantages
    assert not torch.allclose(a, b)
    assert float(b.mean()) == pytest.approx(0.0, abs=1e-6)
