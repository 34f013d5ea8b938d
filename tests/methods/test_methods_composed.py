"""The composed method: with every part but one off it equals the existing method (1e-6 on random batches, over
several steps so the controllers move), the budget's placement and dual update, its controller's bit-exact resume,
its Hypothesis properties, bad input, and `lead-recipes replay --recipe.method composed`."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lead_recipes.cli import main as cli_main
from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import GrpoLeadConfig, RecipeConfig
from lead_recipes.methods.controllers import LeashController
from lead_recipes.methods.grpo import grpo
from lead_recipes.methods.grpo_lead import difficulty_weight

CAP = 4000
OFF = {"correct_reward": "binary", "length_reward": "none", "difficulty": "none", "budget": "none"}


def composed(parts=None, **sections):
    return build_method(RecipeConfig.of({"method": "composed", "composed": {**OFF, **(parts or {})}, **sections}))


def method(name, **sections):
    return build_method(RecipeConfig.of({"method": name, **sections}))


def random_batches(n, seed=0, m=12, g=8, truncate=False, repetitive=False):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        c = torch.rand(m, g, generator=gen) < torch.rand(m, 1, generator=gen)
        l = torch.randint(50, CAP + 1, (m, g), generator=gen).to(torch.float32)
        if truncate:
            l[torch.rand(m, g, generator=gen) < 0.15] = CAP
        rep = (torch.rand(m, g, generator=gen) < 0.2) if repetitive else None
        boxed = torch.rand(m, g, generator=gen) < 0.8
        out.append(RolloutBatch(c, l, CAP, repetitive=rep, think_boxed=boxed))
    return out


def assert_same(a, b):
    assert torch.allclose(a.advantages, b.advantages, rtol=0, atol=1e-6)
    assert torch.allclose(a.rewards, b.rewards, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "lead_cfg",
    [
        {},
        {"aggregator": "median_correct", "whiten": "sequence", "beta_ema": 0.5},
        {"static_lambda_c": 0.7},
        {"unsolved_length": "flat"},
    ],
)
def test_lead_part_alone_equals_lead_over_steps(lead_cfg):
    mine, ref = composed({"length_reward": "lead"}, lead=lead_cfg), method("lead", lead=lead_cfg)
    for b in random_batches(6):
        x, y = mine.step(b), ref.step(b)
        assert_same(x, y)
        assert x.stats["lambda_c"] == y.stats["lambda_c"] and x.stats["psi_l"] == y.stats["psi_l"]
    lead_state = ref.state_dict()
    assert {k: mine.state_dict()[k] for k in lead_state} == lead_state


def test_difficulty_part_alone_equals_grpo_lead_reweighting_of_grpo():
    cfg = GrpoLeadConfig()
    m = composed({"difficulty": "grpo_lead"})
    for b in random_batches(4, seed=1):
        a = grpo(b.correct, b.lengths.double())[1]
        rho = b.correct.double().mean(1, keepdim=True)
        want = torch.where(a > 0, a * difficulty_weight(rho, cfg), a * difficulty_weight(1 - rho, cfg))
        assert torch.allclose(m.step(b).advantages, want.float(), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {
            "repetition_penalty_enable": True,
            "ref_code_format_failure_enable": True,
            "ref_code_sigma_one_enable": True,
            "alpha": 0.2,
        },
    ],
)
def test_grpo_lead_reward_and_reweighting_equal_grpo_lead(options):
    mine = composed({"correct_reward": "grpo_lead", "difficulty": "grpo_lead"}, grpo_lead=options)
    ref = method("grpo-lead", grpo_lead=options)
    for b in random_batches(4, seed=2, truncate=True, repetitive=True):
        assert_same(mine.step(b), ref.step(b))


def test_budget_part_alone_equals_leash_including_the_dual_update():
    leash_cfg = {"target_length": 1800.0, "lr": 0.2, "lambda_init": 0.3}
    mine = composed({"correct_reward": "signed", "budget": "leash", "budget_tokens": 1800.0}, leash=leash_cfg)
    ref = method("leash", leash=leash_cfg)
    lams = []
    for b in random_batches(8, seed=3):
        x, y = mine.step(b), ref.step(b)
        assert_same(x, y)
        assert x.stats["lagrange_lambda_next"] == y.stats["lagrange_lambda_next"]
        assert x.stats["clipped_frac"] == y.stats["clipped_frac"]
        lams.append(y.stats["lagrange_lambda_next"])
    assert len(set(lams)) > 3  # λ really moved, so the dual updates were compared
    want = ref.state_dict()
    got = mine.state_dict()
    assert [got[k] for k in ("lagrange_lambda", "adam_m", "adam_v", "dual_step")] == [
        want[k] for k in ("lagrange_lambda", "adam_m", "adam_v", "step")
    ]


def test_every_part_off_equals_grpo():
    for b in random_batches(3, seed=4):
        assert_same(composed().step(b), method("grpo").step(b))


def test_budget_lowers_only_over_budget_length_rewards_and_never_below_minus_one():
    b = RolloutBatch(
        torch.tensor([[1, 1, 0, 1]], dtype=torch.bool), torch.tensor([[1000.0, 1900.0, 3000.0, 4000.0]]), CAP
    )
    parts = {"length_reward": "lead", "budget_tokens": 2000.0}
    off = composed(parts, lead={"static_lambda_c": 0.5}).step(b)
    on = composed(
        {**parts, "budget": "leash"},
        lead={"static_lambda_c": 0.5},
        leash={"lambda_init": 2.0, "lambda_max": 2.0, "constant_lambda_enable": True},
    ).step(b)
    # shaped reward = 0.5 r_c + 0.5 r_l, L* = 2300: the 3000-token rollout's r_l loses 2·0.5, the 4000-token one
    # would lose 2·1 but stops at −1
    diff = (off.rewards - on.rewards)[0].tolist()
    assert diff[:2] == [0.0, 0.0] and diff[2] == pytest.approx(0.5)
    assert on.rewards[0, 3].item() == pytest.approx(0.5 * 1 + 0.5 * -1.0)
    assert on.stats["clipped_frac"] == 0.25 and off.stats["clipped_frac"] == 0.0


def test_one_channel_budget_stops_at_the_wrong_answer_reward():
    b = RolloutBatch(
        torch.tensor([[1, 1, 0, 0]], dtype=torch.bool), torch.tensor([[1000.0, 4000.0, 1000.0, 4000.0]]), CAP
    )
    leash = {"lambda_init": 1.0, "constant_lambda_enable": True}
    binary = composed({"budget": "leash", "budget_tokens": 1000.0}, leash=leash).step(b)
    assert binary.rewards[0].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_dual_variable_follows_leash_controller_on_batch_mean_length_over_budget_default_b_max_half():
    m = method("composed", leash={"lr": 0.05})
    ctl = LeashController(lr=0.05)
    long = RolloutBatch(
        torch.tensor([[1, 0, 1, 0]] * 3, dtype=torch.bool), torch.tensor([[2600.0, 3000.0, 3500.0, 2200.0]] * 3), CAP
    )
    for _ in range(5):
        out = m.step(long)
        assert out.stats["budget_tokens"] == 2000.0
        assert out.stats["lagrange_lambda_next"] == ctl.update(out.stats["constraint"])
    assert ctl.lam > 0.2
    assert method("composed", lead={"b_max": 3000}).step(long).stats["budget_tokens"] == 1500.0


def test_resume_after_k_steps_through_json_equals_uninterrupted_run():
    recipe = {"leash": {"lr": 0.1, "lambda_init": 0.2}, "lead": {"beta_ema": 0.8}}
    data = random_batches(7, seed=5)
    full = method("composed", **recipe)
    ref = [full.step(b) for b in data]
    first = method("composed", **recipe)
    for b in data[:3]:
        first.step(b)
    resumed = method("composed", **recipe)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    for a, b in zip(ref[3:], [resumed.step(b) for b in data[3:]]):
        assert torch.equal(a.advantages, b.advantages) and a.stats == b.stats
    assert resumed.state_dict() == full.state_dict()
    fresh = method("composed", **recipe)
    assert not torch.equal(fresh.step(data[3]).advantages, ref[3].advantages)


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda s: s.pop("dual_step"), "dual_step"),
        (lambda s: s.update(lagrange_lambda=float("nan")), "lagrange_lambda"),
        (lambda s: s.pop("w_l"), "w_l"),
        (lambda s: s.update(extra=1.0), "unknown keys"),
    ],
)
def test_corrupt_composed_state_is_rejected_and_leaves_the_controller_untouched(mutate, match):
    m = method("composed")
    m.step(random_batches(1)[0])
    before = m.state_dict()
    state = json.loads(json.dumps(before))
    mutate(state)
    with pytest.raises(ValueError, match=match):
        m.load_state_dict(state)
    assert m.state_dict() == before


@pytest.mark.parametrize(
    "recipe,flag",
    [
        ({"composed": {"budget": "lagrange"}}, "--recipe.composed.budget"),
        ({"composed": {"correct_reward": "ternary"}}, "--recipe.composed.correct_reward"),
        ({"composed": {"budget_tokens": 0.0}}, "--recipe.composed.budget_tokens"),
        ({"grpo_lead": {"ref_code_rejection_enable": True}}, "--recipe.grpo_lead.ref_code_rejection_enable"),
    ],
)
def test_bad_recipe_is_a_value_error_naming_the_flag(recipe, flag):
    with pytest.raises(ValueError, match=flag):
        method("composed", **recipe)


def test_repetition_penalty_without_flags_is_a_clear_error():
    m = composed({"correct_reward": "grpo_lead"}, grpo_lead={"repetition_penalty_enable": True})
    with pytest.raises(ValueError, match="repetitive"):
        m.step(random_batches(1)[0])


# ---------------------------------------------------------------- properties (all parts on, budget active)
ACTIVE = {"leash": {"lambda_init": 0.5, "lr": 0.05}, "grpo_lead": {"repetition_penalty_enable": False}}
CONFIGS = [
    {},
    {"correct_reward": "grpo_lead"},
    {"correct_reward": "signed", "length_reward": "none"},
    {"correct_reward": "grpo_lead", "length_reward": "none"},
]


@st.composite
def batches(draw, min_m=1, max_m=4):
    m, g = draw(st.integers(min_m, max_m)), draw(st.integers(2, 8))
    c = draw(st.lists(st.lists(st.booleans(), min_size=g, max_size=g), min_size=m, max_size=m))
    l = draw(st.lists(st.lists(st.integers(1, CAP), min_size=g, max_size=g), min_size=m, max_size=m))
    return torch.tensor(c), torch.tensor(l, dtype=torch.float32)


def run(parts, c, l):
    return method("composed", composed=parts, **ACTIVE).step(RolloutBatch(c, l, CAP))


@pytest.mark.parametrize("parts", CONFIGS)
@settings(max_examples=25, deadline=None)
@given(b=batches())
def test_outputs_are_finite(parts, b):
    out = run(parts, *b)
    assert torch.isfinite(out.advantages).all() and torch.isfinite(out.rewards).all()


@pytest.mark.parametrize("parts", CONFIGS)
@settings(max_examples=25, deadline=None)
@given(b=batches(), seed=st.integers(0, 2**16))
def test_permuting_rollouts_within_groups_and_the_groups_permutes_the_output(parts, b, seed):
    c, l = b
    gen = torch.Generator().manual_seed(seed)
    within = torch.stack([torch.randperm(c.shape[1], generator=gen) for _ in range(c.shape[0])])
    rows = torch.randperm(c.shape[0], generator=gen)
    out = run(parts, c, l)
    p = run(parts, c.gather(1, within)[rows], l.gather(1, within)[rows])
    assert torch.allclose(p.advantages, out.advantages.gather(1, within)[rows], rtol=1e-5, atol=1e-5)
    assert torch.allclose(p.rewards, out.rewards.gather(1, within)[rows], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("parts", CONFIGS[2:])
@settings(max_examples=25, deadline=None)
@given(b=batches(min_m=2), other=batches(min_m=1, max_m=1))
def test_one_channel_changing_one_group_never_changes_another_groups_advantages(parts, b, other):
    c, l = b
    g = c.shape[1]
    c2, l2 = c.clone(), l.clone()
    c2[0], l2[0] = other[0][0].repeat(g)[:g], other[1][0].repeat(g)[:g]
    assert torch.equal(run(parts, c, l).advantages[1:], run(parts, c2, l2).advantages[1:])


@settings(max_examples=25, deadline=None)
@given(b=batches(min_m=3, max_m=4), other=batches(min_m=1, max_m=1))
def test_two_channels_static_weights_change_other_groups_only_by_one_common_affine_map(b, other):
    """With static λ the only batch-level coupling left is BatchWhiten's mean and std (λ_t is fixed for the batch)."""
    c, l = b
    g = c.shape[1]
    c2, l2 = c.clone(), l.clone()
    c2[0], l2[0] = other[0][0].repeat(g)[:g], other[1][0].repeat(g)[:g]
    recipe = {**ACTIVE, "lead": {"static_lambda_c": 0.6}}
    x = method("composed", **recipe).step(RolloutBatch(c, l, CAP)).advantages[1:].double().reshape(-1)
    y = method("composed", **recipe).step(RolloutBatch(c2, l2, CAP)).advantages[1:].double().reshape(-1)
    if float(x.std()) < 1e-3 or float(y.std()) < 1e-3:
        return
    design = torch.stack([x, torch.ones_like(x)], 1)
    sol = torch.linalg.lstsq(design, y.unsqueeze(1)).solution
    assert torch.allclose(design @ sol, y.unsqueeze(1), atol=1e-4) and float(sol[0]) > 0


# ---------------------------------------------------------------- replay
def test_replay_composed_writes_both_controller_trajectories(tmp_path, capsys):
    steps = [
        {
            "step": s,
            "groups": [
                {"correct": [True, False, True, False], "lengths": [2600, 3900, 3100, 2500]},
                {"correct": [True, True, False, False], "lengths": [2200, 2900, 3600, 1800]},
            ],
        }
        for s in (1, 2, 3)
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(s) + "\n" for s in steps))
    argv = ["replay", str(src), "--output", str(out), "--recipe.method", "composed", "--recipe.leash.lr", "0.1"]
    assert cli_main(argv) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [ln["controller"]["dual_step"] for ln in lines] == [1, 2, 3]
    assert lines[-1]["controller"]["lagrange_lambda"] > 0 and lines[-1]["controller"]["step"] == 3
    table = capsys.readouterr().out.splitlines()
    assert "lagrange_lambda" in table[0] and "lambda_c" in table[0]
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
