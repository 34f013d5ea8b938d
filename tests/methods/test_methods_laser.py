"""Laser (docs/methods.md#equations-laser): the golden groups of the 2026 baselines spec (§9.2), produced by the
authors' `length_penalty.py` and `ray_trainer.py` statistics and verl's GRPO, to 1e-6 on rewards and 1e-5 on
advantages: G-L1 through the method, G-L2's monitor passes through `monitor_targets` and the targets' state; a batch
without the format flag is refused. G-L2's trajectory and G-L3 through laser-d / laser-de: test_methods_laser_d.py."""

from __future__ import annotations

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig
from lead_recipes.methods.controllers import LaserTargets
from lead_recipes.methods.laser import monitor_targets, target_grid


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
    with pytest.raises(ValueError, match="step must be > 0 tokens, got 0"):
        target_grid(25, 100, 0)
    assert target_grid(25, 100, 6) == [25, 31, 37, 43, 49, 55, 61, 67, 73, 79, 85, 91, 97]
