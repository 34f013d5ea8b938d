"""Leash (arXiv 2512.21540; our optimiser choices in docs/methods.md): the clipped one-sided reward, primal-then-dual
ordering, λ rising while over L_t and
falling to λ_min when under, the projection bounds, and Leash-C."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig
from lead_recipes.methods.controllers import LeashController
from lead_recipes.methods.leash import leash


def method(**kw):
    return build_method(RecipeConfig.of({"method": "leash", "leash": {"target_length": 1000.0, **kw}}))


def batch(correct, lengths, cap=4000):
    return RolloutBatch(torch.tensor(correct, dtype=torch.bool), torch.tensor(lengths, dtype=torch.float32), cap)


OVER = batch([[1, 0, 1, 0]], [[2000, 3000, 1500, 2500]])
UNDER = batch([[1, 0, 1, 0]], [[200, 300, 500, 400]])


def test_shaped_reward_values_one_sided_and_clipped():
    r, _, g, _ = leash(
        torch.tensor([[1, 1, 1, 0, 0]], dtype=torch.bool),
        torch.tensor([[500.0, 1000.0, 1500.0, 500.0, 3000.0]], dtype=torch.float64),
        1000.0,
        0.5,
    )
    assert r[0].tolist() == [1.0, 1.0, 0.75, -1.0, -1.0]  # short ⇒ no bonus; wrong ⇒ −1 (clipped)
    assert g == pytest.approx((-0.5 + 0 + 0.5 - 0.5 + 2.0) / 5)


def test_lambda_rises_while_lengths_exceed_target():
    m = method()
    lams = [m.step(OVER).stats["lagrange_lambda_next"] for _ in range(5)]
    assert lams[0] == pytest.approx(0.01, rel=1e-6)  # Adam's first step has magnitude lr
    assert all(b > a for a, b in zip(lams, lams[1:]))


def test_lambda_falls_to_lambda_min_when_under_target_and_stays():
    m = method(lr=0.05)
    for _ in range(10):
        m.step(OVER)
    top = m.controller.lam
    lams = [m.step(UNDER).stats["lagrange_lambda_next"] for _ in range(200)]
    peak = lams.index(max(lams))  # Adam's momentum may carry λ up a few steps before it turns
    assert top > 0.3 and peak < 10 and all(b <= a for a, b in zip(lams[peak:], lams[peak + 1 :]))
    assert lams[-1] == 0.0 and lams[-50:] == [0.0] * 50


def test_lambda_used_for_a_batch_is_the_one_before_its_dual_update():
    m = method(lr=0.1)
    first = m.step(OVER)
    second = m.step(OVER)
    assert first.stats["lagrange_lambda"] == 0.0 and first.rewards.max() == 1.0
    assert second.stats["lagrange_lambda"] == first.stats["lagrange_lambda_next"] > 0
    assert second.rewards[0, 0] < 1.0


def test_lambda_saturates_at_lambda_max():
    m = method(lr=0.5, lambda_max=0.7)
    lams = [m.step(OVER).stats["lagrange_lambda_next"] for _ in range(20)]
    assert max(lams) == 0.7 and lams[-1] == 0.7


def test_leash_c_keeps_lambda_constant():
    m = method(constant_lambda_enable=True, lambda_init=0.4)
    outs = [m.step(OVER) for _ in range(3)]
    assert [o.stats["lagrange_lambda"] for o in outs] == [0.4] * 3 and m.controller.step == 0


@settings(max_examples=60, deadline=None)
@given(
    g=st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=30),
    lr=st.floats(1e-4, 2.0),
    lo=st.floats(0, 0.5),
    width=st.floats(0, 2),
)
def test_lambda_always_within_projection_bounds(g, lr, lo, width):
    c = LeashController(lr=lr, lambda_min=lo, lambda_max=lo + width, lam=lo)
    for x in g:
        lam = c.update(x)
        assert lo <= lam <= lo + width


@settings(max_examples=60, deadline=None)
@given(lam=st.floats(0, 10), lengths=st.lists(st.integers(1, 4000), min_size=2, max_size=8), data=st.data())
def test_shaped_reward_always_in_minus_one_one_and_wrong_never_above_correct(lam, lengths, data):
    correct = data.draw(st.lists(st.booleans(), min_size=len(lengths), max_size=len(lengths)))
    r, _, _, _ = leash(torch.tensor([correct]), torch.tensor([lengths], dtype=torch.float64), 1000.0, lam)
    assert float(r.min()) >= -1 and float(r.max()) <= 1
    if any(correct) and not all(correct):
        cm = torch.tensor(correct)
        assert float(r[0][cm].min()) >= float(r[0][~cm].max())
