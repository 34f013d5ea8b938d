"""Laser (docs/methods.md#equations-laser): the golden group G-L1 of the 2026 baselines spec (§9.2), produced by the
authors' `length_penalty.py` (mode "reward") and verl's GRPO, to 1e-6 on rewards and 1e-5 on advantages; the base
score from the format flag; a batch without the flag is refused naming the fix."""

from __future__ import annotations

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig


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
