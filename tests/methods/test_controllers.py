"""Controllers and Method objects: state_dict round trips bit-exactly (k steps + save + load + rest == an
uninterrupted run, through JSON and through torch.save), and every Method pickles (it crosses Ray boundaries)."""

from __future__ import annotations

import io
import json
import pickle

import pytest
import torch
from support.batches import ready, targets

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import METHODS, RecipeConfig
from lead_recipes.methods.controllers import LeadController, LeashController, StepCounter

RECIPES = {
    "lead": {"method": "lead"},
    "leash": {"method": "leash", "leash": {"target_length": 1500.0, "lr": 0.05}},
    "lead-zero-psi-skip": {"method": "lead", "lead": {"zero_psi_skip_enable": True, "beta_ema": 0.9}},
    "kimi-warmup": {"method": "kimi", "kimi": {"warmup_steps": 2}},
}


def batches(n, seed=0, method="lead"):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        c = torch.rand(6, 8, generator=gen) < torch.rand(6, 1, generator=gen)
        l = torch.randint(50, 4001, (6, 8), generator=gen).to(torch.float32)
        out.append(RolloutBatch(c, l, 4000, **targets(method, 6, seed=seed * 1000 + i)))
    return out


def json_roundtrip(state):
    return json.loads(json.dumps(state))


def torch_roundtrip(state):
    buf = io.BytesIO()
    torch.save({"recipe": state}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)["recipe"]


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("roundtrip", [json_roundtrip, torch_roundtrip])
@pytest.mark.parametrize("k", [1, 4])
def test_resume_after_k_steps_equals_uninterrupted_run(recipe, roundtrip, k):
    data = batches(10)
    full = build_method(RecipeConfig.of(RECIPES[recipe]))
    ref = [full.step(b) for b in data]
    first = build_method(RecipeConfig.of(RECIPES[recipe]))
    for b in data[:k]:
        first.step(b)
    resumed = build_method(RecipeConfig.of(RECIPES[recipe]))
    resumed.load_state_dict(roundtrip(first.state_dict()))
    rest = [resumed.step(b) for b in data[k:]]
    for a, b in zip(ref[k:], rest):
        assert torch.equal(a.advantages, b.advantages) and torch.equal(a.rewards, b.rewards)
        assert a.stats == b.stats
    assert resumed.state_dict() == full.state_dict()


@pytest.mark.parametrize("recipe", RECIPES)
def test_fresh_method_differs_from_resumed_one(recipe):
    """The round-trip test above can fail: without loading, the controller starts over and diverges."""
    data = batches(6)
    full = build_method(RecipeConfig.of(RECIPES[recipe]))
    ref = [full.step(b) for b in data]
    fresh = build_method(RecipeConfig.of(RECIPES[recipe]))
    assert not torch.equal(fresh.step(data[3]).advantages, ref[3].advantages)


def test_state_dicts_hold_only_plain_json_types():
    for ctl in (LeadController(), LeashController(), StepCounter()):
        for v in ctl.state_dict().values():
            assert type(v) in (int, float)


@pytest.mark.parametrize("name", METHODS)
def test_methods_pickle_mid_run_and_continue_identically(name):
    data = batches(3, seed=1, method=name)
    m = ready(build_method(RecipeConfig.of({"method": name})))
    m.step(data[0])
    clone = pickle.loads(pickle.dumps(m))
    assert torch.equal(m.step(data[1]).advantages, clone.step(data[1]).advantages)
    assert m.state_dict() == clone.state_dict()


@pytest.mark.parametrize(
    "state,match",
    [
        ({"w_c": 0.5, "w_l": 0.5, "step": 1, "lambda_c": 0.5}, "lambda_l"),
        ({"w_c": float("nan"), "w_l": 0.5, "step": 1, "lambda_c": 0.5, "lambda_l": 0.5}, "finite"),
        ({"w_c": 0.5, "w_l": 0.5, "step": -1, "lambda_c": 0.5, "lambda_l": 0.5}, "step"),
    ],
)
def test_corrupt_lead_state_is_rejected(state, match):
    with pytest.raises(ValueError, match=match):
        LeadController().load_state_dict(state)


def test_corrupt_leash_state_is_rejected_and_leaves_a_clear_message():
    with pytest.raises(ValueError, match="lagrange_lambda"):
        LeashController().load_state_dict({"adam_m": 0.0, "adam_v": 0.0, "step": 0})


@pytest.mark.parametrize(
    "state,match", [({"step": -1}, "step"), ({"step": 1.5}, "step"), ({"step": 1, "w_c": 0.5}, "w_c")]
)
def test_corrupt_step_counter_state_is_rejected_and_leaves_the_count(state, match):
    counter = StepCounter(step=7)
    with pytest.raises(ValueError, match=match):
        counter.load_state_dict(state)
    assert counter.step == 7


def test_stateless_method_rejects_controller_state():
    m = build_method(RecipeConfig.of({"method": "grpo"}))
    with pytest.raises(ValueError, match="stateless"):
        m.load_state_dict({"w_c": 0.5})


def test_rejected_state_leaves_the_controller_untouched():
    ctl = LeadController()
    ctl.update(0.3, 0.1)
    before = ctl.state_dict()
    with pytest.raises(ValueError):
        ctl.load_state_dict({"w_c": 0.9, "w_l": 0.1, "lambda_c": 0.9, "lambda_l": 0.1, "step": "x"})
    assert ctl.state_dict() == before
