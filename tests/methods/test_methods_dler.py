"""DLER (docs/methods.md#equations-dler): the golden batch G-D1 of the 2026 baselines spec (§9.1), produced by the
authors' verl functions (REINFORCE++-baseline, masked_whiten, the truncation scale, the boost), to 1e-6 on rewards
and 1e-5 on advantages. The plug-in receives the batch after OpenRLHF's dynamic filter, so the two groups the
authors' filter drops (all correct, all wrong) are not in it; the truncation scale κ arrives as OpenRLHF's
stop-properly length penalty, c·(κ − 1) on a truncated rollout."""

from __future__ import annotations

import pytest
import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig

# G-D1 after the filter: q0 and q2 (correct, lengths, truncated = not stopped)
CORRECT = [[1, 1, 0, 0], [1, 0, 0, 0]]
LENGTHS = [[1200, 2500, 3100, 4000], [4000, 900, 1500, 2000]]
TRUNCATED = [[0, 0, 0, 1], [1, 0, 0, 0]]


def run(kappa, **dler):
    c, t = torch.tensor(CORRECT, dtype=torch.bool), torch.tensor(TRUNCATED, dtype=torch.bool)
    penalty = torch.where(t, c.double() * (kappa - 1.0), 0.0)  # OpenRLHF: a truncated reward scaled by κ
    m = build_method(RecipeConfig.of({"method": "dler", **({"dler": dler} if dler else {})}))
    return m.step(RolloutBatch(c, torch.tensor(LENGTHS, dtype=torch.float32), 4000, t, length_penalty=penalty))


def close(got, want, atol):
    assert torch.allclose(got.double(), torch.tensor(want, dtype=torch.float64), atol=atol), got.tolist()


def test_g_d1_project_page_truncated_correct_gets_zero_and_its_group_is_shifted_by_the_batch_mean():
    out = run(0.0)
    close(out.rewards, [[1, 1, 0, 0], [0, 0, 0, 0]], 1e-6)
    # q2 survived the filter on its scores but all its rewards are 0: every rollout gets −ā/σ̄ = 0.242975
    close(out.advantages, [[1.615068, 1.615068, -1.129118, -1.129118], [0.242975] * 4], 1e-5)
    assert out.stats["whiten_mean"] == pytest.approx(-0.088542, abs=1e-6)
    assert out.stats["whiten_std"] == pytest.approx(0.364407, abs=1e-6)


def test_g_d1_code_truncation_scale_keeps_a_tenth():
    out = run(0.1)
    close(out.rewards, [[1, 1, 0, 0], [0.1, 0, 0, 0]], 1e-6)
    close(out.advantages, [[1.570448, 1.570448, -1.143558, -1.143558], [0.416996, 0.145595, 0.145595, 0.145595]], 1e-5)


def test_g_d1_code_correct_boost_also_hits_the_truncated_correct_rollout():
    out = run(0.0, ref_code_correct_boost=0.1)
    close(out.rewards, [[1, 1, 0, 0], [0, 0, 0, 0]], 1e-6)
    close(out.advantages, [[1.715068, 1.715068, -1.129118, -1.129118], [0.342975, 0.242975, 0.242975, 0.242975]], 1e-5)


def test_without_the_truncation_flag_a_truncated_correct_rollout_keeps_its_reward():
    # no stop-properly penalty (the recipe's flag not set): the method itself never looks at truncation
    c = torch.tensor(CORRECT, dtype=torch.bool)
    m = build_method(RecipeConfig.of({"method": "dler"}))
    out = m.step(RolloutBatch(c, torch.tensor(LENGTHS, dtype=torch.float32), 4000, torch.tensor(TRUNCATED).bool()))
    assert out.rewards[1, 0] == 1.0
