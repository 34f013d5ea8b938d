"""Hypothesis properties of every method: finite outputs, permutation equivariance within a group, group isolation
(except LEAD/GDPO's documented batch-level whitening and controllers) and the reward orderings the papers state."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.batches import ready, targets

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import METHODS, RecipeConfig

CAP = 4000
ISOLATED = (
    "grpo",
    "grpo-scalarized",
    "grpo-lead",
    "leash",
    "shorter-better",
    "arora-zanette",
    "l1-exact",
    "l1-max",
    "kimi",
    "thinkprune",
)


@st.composite
def batches(draw, min_m=1, max_m=4):
    m = draw(st.integers(min_m, max_m))
    g = draw(st.integers(2, 8))
    correct = draw(st.lists(st.lists(st.booleans(), min_size=g, max_size=g), min_size=m, max_size=m))
    lengths = draw(st.lists(st.lists(st.integers(1, CAP), min_size=g, max_size=g), min_size=m, max_size=m))
    return torch.tensor(correct), torch.tensor(lengths, dtype=torch.float32)


def fit(row: torch.Tensor, g: int) -> torch.Tensor:
    """`row` cut or tiled to G entries."""
    return row[:g] if row.numel() >= g else row.repeat(g)[:g]


def run(name, c, l, perm=None, **recipe):
    """The method on (c, l) with the shared per-prompt and per-rollout fields; `perm` permutes the per-rollout ones
    (AdaptThink's no-think flags) as it permuted c and l."""
    fields = targets(name, c.shape[0], g=c.shape[1])
    if perm is not None:
        fields = {k: v.gather(1, perm) if v.dim() == 2 else v for k, v in fields.items()}
    return ready(build_method(RecipeConfig.of({"method": name, **recipe}))).step(RolloutBatch(c, l, CAP, **fields))


@pytest.mark.parametrize("name", METHODS)
@settings(max_examples=40, deadline=None)
@given(b=batches())
def test_outputs_are_finite_with_fixed_stats_keys(name, b):
    out = run(name, *b)
    assert torch.isfinite(out.advantages).all() and torch.isfinite(out.rewards).all()
    assert out.advantages.dtype == torch.float32 and out.advantages.shape == b[0].shape


@pytest.mark.parametrize("name", METHODS)
@settings(max_examples=40, deadline=None)
@given(b=batches(), seed=st.integers(0, 2**16))
def test_permuting_rollouts_within_a_group_permutes_advantages(name, b, seed):
    c, l = b
    perm = torch.stack(
        [torch.randperm(c.shape[1], generator=torch.Generator().manual_seed(seed + q)) for q in range(c.shape[0])]
    )
    a = run(name, c, l).advantages
    p = run(name, c.gather(1, perm), l.gather(1, perm), perm).advantages
    assert torch.allclose(p, a.gather(1, perm), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ISOLATED)
@settings(max_examples=40, deadline=None)
@given(b=batches(min_m=2), other=batches(min_m=1, max_m=1))
def test_changing_one_group_never_changes_another_groups_advantages(name, b, other):
    c, l = b
    oc, ol = other
    g = c.shape[1]
    c2, l2 = c.clone(), l.clone()
    c2[0], l2[0] = fit(oc[0], g), fit(ol[0], g)
    assert torch.equal(run(name, c, l).advantages[1:], run(name, c2, l2).advantages[1:])


@pytest.mark.parametrize("name,recipe", [("lead", {"lead": {"static_lambda_c": 0.6}}), ("gdpo", {})])
@settings(max_examples=40, deadline=None)
@given(b=batches(min_m=3, max_m=4), other=batches(min_m=1, max_m=1))
def test_whitened_methods_change_other_groups_only_by_one_common_affine_map(name, recipe, b, other):
    """LEAD (static λ) and GDPO: another group's data enters only through BatchWhiten's batch mean and std."""
    c, l = b
    g = c.shape[1]
    c2, l2 = c.clone(), l.clone()
    c2[0], l2[0] = fit(other[0][0], g), fit(other[1][0], g)
    x = run(name, c, l, **recipe).advantages[1:].double().reshape(-1)
    y = run(name, c2, l2, **recipe).advantages[1:].double().reshape(-1)
    if float(x.std()) < 1e-3 or float(y.std()) < 1e-3:  # whitened rows all equal: nothing to compare
        return
    design = torch.stack([x, torch.ones_like(x)], 1)
    sol = torch.linalg.lstsq(design, y.unsqueeze(1)).solution
    assert torch.allclose(design @ sol, y.unsqueeze(1), atol=1e-4) and float(sol[0]) > 0


def _pairs(correct, lengths, score):
    """(correct short, correct long) and (correct, wrong) pairs within each group."""
    out = []
    for q in range(correct.shape[0]):
        for i in range(correct.shape[1]):
            for j in range(correct.shape[1]):
                out.append(
                    (
                        bool(correct[q, i]),
                        bool(correct[q, j]),
                        float(lengths[q, i]),
                        float(lengths[q, j]),
                        float(score[q, i]),
                        float(score[q, j]),
                    )
                )
    return out


@settings(max_examples=60, deadline=None)
@given(b=batches())
def test_grpo_lead_correct_short_ge_correct_long_gt_wrong(b):
    c, l = b
    out = run("grpo-lead", c, l)
    effective = c & (l < CAP)  # a truncated response (at the cap) counts as incorrect in GRPO-LEAD
    for score in (out.rewards, out.advantages):
        for ci, cj, li, lj, si, sj in _pairs(effective, l, score):
            if ci and cj and li <= lj:
                assert si >= sj - 1e-6
            if ci and not cj:
                assert si > sj or (si == sj == 0.0)  # equal only when the whole group has zero advantage


@settings(max_examples=60, deadline=None)
@given(b=batches(), lam=st.floats(0, 1))
def test_leash_correct_short_ge_correct_long_ge_wrong(b, lam):
    c, l = b
    out = run("leash", c, l, leash={"lambda_init": lam, "target_length": 1000.0})
    for ci, cj, li, lj, si, sj in _pairs(c, l, out.rewards):
        if ci and cj and li <= lj:
            assert si >= sj
        if ci and not cj:
            assert si >= sj


@settings(max_examples=60, deadline=None)
@given(b=batches())
def test_shorter_better_correct_short_ge_correct_long(b):
    c, l = b
    out = run("shorter-better", c, l)
    for ci, cj, li, lj, si, sj in _pairs(c, l, out.rewards):
        if ci and cj and li <= lj:
            assert si >= sj


def effective(c, l):
    """ĉ of the length baselines: a rollout at the cap is truncated (RolloutBatch's default) and counts as wrong."""
    return c & (l < CAP)


@settings(max_examples=60, deadline=None)
@given(b=batches(), alpha=st.floats(0, 1))
def test_arora_correct_short_ge_correct_long_gt_wrong(b, alpha):
    c, l = b
    out = run("arora-zanette", c, l, arora_zanette={"alpha": alpha})
    for score in (out.rewards, out.advantages):
        for ci, cj, li, lj, si, sj in _pairs(effective(c, l), l, score):
            if ci and cj and li <= lj:
                assert si >= sj - 1e-6
            if ci and not cj:
                assert si > sj


@settings(max_examples=60, deadline=None)
@given(b=batches(), n_gold=st.integers(1, 2 * CAP))
def test_l1_exact_closer_to_the_target_ge_farther_and_correct_is_worth_exactly_one(b, n_gold):
    c, l = b
    gold = torch.full((c.shape[0],), float(n_gold))
    out = build_method(RecipeConfig(method="l1-exact")).step(RolloutBatch(c, l, CAP, n_gold=gold))
    ok = effective(c, l)
    for ci, cj, di, dj, si, sj in _pairs(ok, (l - n_gold).abs(), out.rewards):
        if ci == cj and di <= dj:
            assert si >= sj - 1e-6
        if ci and not cj and di == dj:
            assert si - sj == pytest.approx(1.0, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(b=batches(), n_gold=st.integers(1, 2 * CAP))
def test_l1_max_rewards_in_0_1_correct_short_ge_correct_long_ge_wrong(b, n_gold):
    c, l = b
    m = c.shape[0]
    batch = RolloutBatch(c, l, CAP, n_gold=torch.full((m,), float(n_gold)), l1_max=torch.ones(m, dtype=torch.bool))
    out = build_method(RecipeConfig(method="l1-max")).step(batch)
    assert ((out.rewards >= 0) & (out.rewards <= 1)).all()
    for ci, cj, li, lj, si, sj in _pairs(effective(c, l), l, out.rewards):
        if ci and cj and li <= lj:
            assert si >= sj
        if not cj:
            assert sj == 0.0 and si >= sj


@settings(max_examples=60, deadline=None)
@given(b=batches(), w=st.floats(0, 2))
def test_kimi_shorter_ge_longer_at_equal_correctness_and_correct_ge_wrong_for_w_up_to_2(b, w):
    c, l = b
    out = run("kimi", c, l, kimi={"weight": w})
    for ci, cj, li, lj, si, sj in _pairs(effective(c, l), l, out.rewards):
        if ci == cj and li <= lj:
            assert si >= sj - 1e-6
        if ci and not cj:
            assert si >= sj - 1e-6


@settings(max_examples=60, deadline=None)
@given(b=batches(), limit=st.integers(1, 2 * CAP))
def test_thinkprune_reward_is_exactly_correct_and_finished_within_the_limit(b, limit):
    c, l = b
    out = run("thinkprune", c, l, thinkprune={"limit": limit})
    assert torch.equal(out.rewards, (effective(c, l) & (l <= limit)).float())
