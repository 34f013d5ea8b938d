"""Laser (docs/methods.md#equations-laser): the golden groups of the 2026 baselines spec (§9.2), produced by the
authors' `length_penalty.py` and `ray_trainer.py` statistics and verl's GRPO, to 1e-6 on rewards and 1e-5 on
advantages: G-L1 through the method, G-L2/G-L3 through the Laser-D/-DE building blocks (monitor targets, bucket
rewards, the exploration bonus and its guard, the targets' state); a batch without the format flag is refused."""

from __future__ import annotations

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.common import group_normalize
from lead_recipes.methods.config import RecipeConfig
from lead_recipes.methods.controllers import LaserTargets
from lead_recipes.methods.laser import laser_d_reward, monitor_targets, target_grid


def run(correct, lengths, boxed, cap=8192, **laser):
    m = build_method(RecipeConfig.of({"method": "laser", "laser": {"target_length": 4096.0, **laser}}))
    b = RolloutBatch(
        torch.tensor([correct], dtype=torch.bool),
        torch.tensor([lengths], dtype=torch.float32),
        cap,
        answer_boxed=None if boxed is None else torch.tensor([boxed], dtype=torch.bool),
    )
    return m.step(b)


def test_g_l1_bonus_is_inclusive_at_the_target_and_only_for_a_correct_well_formatted_answer():
    # s [1, 1, 1, −0.5, −0.5, −1]: correct ×3, wrong ×2 (format ok), one format failure (cut at 8192, no </think>)
    out = run([1, 1, 1, 0, 0, 0], [1500, 4096, 4097, 900, 6000, 8192], [1, 1, 1, 1, 1, 0])
    assert out.rewards[0].tolist() == pytest.approx([1.5, 1.5, 1.0, -0.5, -0.5, -1.0], abs=1e-6)
    want = [1.03661, 1.03661, 0.592348, -0.740435, -0.740435, -1.184697]
    assert out.advantages[0].tolist() == pytest.approx(want, abs=1e-5)


def test_g_l1_all_correct_within_the_target_have_zero_advantage():
    out = run([1] * 6, [1000, 2000, 3000, 3500, 3900, 4000], [1] * 6)
    assert out.rewards[0].tolist() == [1.5] * 6 and out.advantages.abs().sum() == 0


def test_a_graded_correct_answer_with_a_format_failure_scores_minus_one():
    out = run([1, 1], [500, 600], [1, 0])
    assert out.rewards[0].tolist() == [1.5, -1.0]


def test_without_format_flags_laser_is_a_clear_error():
    with pytest.raises(ValueError, match="answer_boxed"):
        run([1, 0], [100, 200], None)


# ------------------------------------------------------------------ Laser-D / Laser-DE building blocks (G-L2, G-L3)
GRID = target_grid(1024)  # Laser-D-L1024: 1024, 2048, …, 16384


def monitor(*prompts):
    """(correct [P, 8], lengths [P, 8]) from (number correct, lengths) per monitor prompt."""
    correct = torch.tensor([[j < k for j in range(8)] for k, _ in prompts])
    return correct, torch.tensor([lengths for _, lengths in prompts], dtype=torch.float64)


MONITORS = [  # G-L2: the monitor passes before step 1 and after steps 20 and 40, and the targets each gives
    (
        monitor(
            (8, [2500, 2600, 2700, 2800, 3000, 3500, 4000, 5000]),
            (4, [4000, 4500, 5000, 6000, 7000, 8000, 9000, 12000]),
            (1, [6000, 8000, 9000, 10000, 11000, 12000, 13000, 16384]),
        ),
        {"low": 16384, "medium": 6144, "high": 3072},
    ),
    (
        monitor(
            (8, [1000, 1100, 1200, 1500, 1800, 2000, 2100, 2500]),
            (6, [2000, 2200, 2600, 3000, 3500, 4000, 5000, 6000]),
            (3, [3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000]),
        ),
        {"low": None, "medium": 6144, "high": 2048},
    ),
    (
        monitor(
            (8, [800, 900, 1000, 1000, 1100, 1200, 1300, 1400]),
            (5, [1500, 1800, 2000, 2500, 3000, 3500, 4000, 4500]),
            (2, [2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000]),
        ),
        {"low": 9216, "medium": 3072, "high": 1024},
    ),
]


@pytest.mark.parametrize("passes, want", [(m[0], m[1]) for m in MONITORS])
def test_g_l2_monitor_pass_gives_the_authors_targets(passes, want):
    assert monitor_targets(*passes, GRID) == want


def T(x):
    return torch.tensor(x, dtype=torch.float64)


@pytest.mark.parametrize(
    "targets, s, l, laser_d, laser_de",
    [
        (  # step 1, g0: 7/8 ⇒ high, L_T 3072 (inclusive); Laser-DE lifts the long wrong one to 0
            MONITORS[0][1],
            [1] * 7 + [-0.5],
            [2000, 2500, 3072, 3073, 4000, 5000, 6000, 7000],
            ([1.5] * 3 + [1] * 4 + [-0.5], [0.763761] * 3 + [0] * 4 + [-2.291284]),
            ([1.5] * 3 + [1] * 4 + [0], [0.882917] * 3 + [-0.126131] * 4 + [-2.144227]),
        ),
        (  # step 21, g0: 4/8 ⇒ medium, L_T 6144
            MONITORS[1][1],
            [1] * 4 + [-0.5] * 3 + [-1],
            [3000, 6144, 6145, 9000, 2000, 7000, 12000, 14000],
            (
                [1.5, 1.5, 1, 1, -0.5, -0.5, -0.5, -1],
                [1.14963] * 2 + [0.665576] * 2 + [-0.786589] * 3 + [-1.270644],
            ),
            (
                [1.5, 1.5, 1, 1, -0.5, 0, 0, -1],
                [1.127265] * 2 + [0.596787] * 2 + [-0.994645, -0.464168, -0.464168, -1.525123],
            ),
        ),
        (  # step 1, g1: 2/8 ⇒ low, L_T 16384: both correct get α, no wrong one is longer than L_T
            MONITORS[0][1],
            [1, 1] + [-0.5] * 4 + [-1, -1],
            [9000, 12000, 5000, 8000, 10000, 15000, 16384, 16384],
            ([1.5, 1.5] + [-0.5] * 4 + [-1, -1], [1.583146] * 2 + [-0.365341] * 4 + [-0.852463] * 2),
            ([1.5, 1.5] + [-0.5] * 4 + [-1, -1], [1.583146] * 2 + [-0.365341] * 4 + [-0.852463] * 2),
        ),
        (  # step 21, g1: 1/8 ⇒ low, whose target is none after the step-20 monitor: L_T = ∞, no exploration bonus
            MONITORS[1][1],
            [1] + [-0.5] * 5 + [-1, -1],
            [13000, 2000, 3000, 4000, 5000, 6000, 7000, 8000],
            ([1.5] + [-0.5] * 5 + [-1, -1], [2.371705] + [-0.158114] * 5 + [-0.790568] * 2),
            ([1.5] + [-0.5] * 5 + [-1, -1], [2.371705] + [-0.158114] * 5 + [-0.790568] * 2),
        ),
        (  # step 41, g0: 8/8 ⇒ high, L_T 1024 (inclusive)
            MONITORS[2][1],
            [1] * 8,
            [800, 1000, 1024, 1025, 1500, 2000, 2500, 3000],
            ([1.5] * 3 + [1] * 5, [1.20761] * 3 + [-0.724566] * 5),
            ([1.5] * 3 + [1] * 5, [1.20761] * 3 + [-0.724566] * 5),
        ),
        (  # step 41, g1: 3/8 ⇒ medium, L_T 3072
            MONITORS[2][1],
            [1, 1, 1] + [-0.5] * 4 + [-1],
            [2000, 3072, 4000, 1000, 2500, 3500, 5000, 6000],
            ([1.5, 1.5, 1] + [-0.5] * 4 + [-1], [1.339585] * 2 + [0.852463] + [-0.608902] * 4 + [-1.096024]),
            (
                [1.5, 1.5, 1, -0.5, -0.5, 0, 0, -1],
                [1.297185] * 2 + [0.778311, -0.778311, -0.778311, -0.259437, -0.259437, -1.297185],
            ),
        ),
    ],
)
def test_g_l2_laser_d_and_laser_de_rewards_and_advantages(targets, s, l, laser_d, laser_de):
    for explore, (rewards, advantages) in ((False, laser_d), (True, laser_de)):
        r = laser_d_reward(T([s]), T([l]), targets, 0.5, explore=explore)
        assert r[0].tolist() == pytest.approx(rewards, abs=1e-6)
        assert group_normalize(r)[0].tolist() == pytest.approx(advantages, abs=1e-5)


def test_g_l3_the_intended_guard_withholds_the_bonus_from_a_repetitive_long_wrong_answer():
    s, l = T([[1, 1, 1] + [-0.5] * 4 + [-1]]), T([[2000, 3072, 4000, 1000, 2500, 3500, 5000, 6000]])
    rep = torch.tensor([[False] * 6 + [True, False]])
    r = laser_d_reward(s, l, MONITORS[2][1], 0.5, explore=True, repetitive=rep)
    assert r[0].tolist() == [1.5, 1.5, 1, -0.5, -0.5, 0, -0.5, -1]
    want = [1.315438] * 2 + [0.814319, -0.689039, -0.689039, -0.18792, -0.689039, -1.190158]
    assert group_normalize(r)[0].tolist() == pytest.approx(want, abs=1e-5)


def test_laser_targets_state_after_the_step_40_monitor_round_trips_through_json():
    import json

    c = LaserTargets()
    for step, (passes, _) in zip((0, 20, 40), MONITORS):
        c.observe(monitor_targets(*passes, GRID), step)
    c.step = 40
    state = json.loads(json.dumps(c.state_dict()))
    assert state == {"targets": {"low": 9216, "medium": 3072, "high": 1024}, "last_monitor_step": 40, "step": 40}
    restored = LaserTargets()
    restored.load_state_dict(state)
    assert restored.state_dict() == state
    with pytest.raises(ValueError, match="low, medium, high"):
        restored.load_state_dict({"targets": {"low": 1024}, "last_monitor_step": 0, "step": 0})


def test_laser_targets_before_any_monitor_save_explicit_nulls_that_load_back():
    state = LaserTargets().state_dict()
    assert state == {"targets": {"low": None, "medium": None, "high": None}, "last_monitor_step": 0, "step": 0}
    restored = LaserTargets()
    restored.load_state_dict(state)
    assert restored.state_dict() == state


def test_a_target_grid_whose_lower_bound_is_above_the_upper_is_refused_by_name():
    with pytest.raises(ValueError, match="lower bound 20000 is above the upper bound 16384"):
        target_grid(20000)
    assert target_grid(16384) == [16384]
