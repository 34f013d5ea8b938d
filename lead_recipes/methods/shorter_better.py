"""ShorterBetter (Yi, Wang, Li 2025, arXiv 2504.21370): r = α·1[correct] − β·|l − SOL_q|, SOL_q the shortest
correct length of prompt q (the mean of all when none is correct), then group normalisation. Stateless.
See docs/methods.md#equations-shorter-better.
"""

from __future__ import annotations

import math

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import RecipeConfig, ShorterBetterConfig


def shorter_better(
    correct: torch.Tensor, lengths: torch.Tensor, cfg: ShorterBetterConfig, length_penalty=0.0
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """SOL_q, r (+ the length penalty) and A (docs/methods.md#equations-shorter-better).
    Returns (rewards, advantages, statistics)."""
    solved = correct.any(1, keepdim=True)
    shortest_correct = torch.where(correct, lengths, math.inf).amin(1, keepdim=True)
    sol = torch.where(solved, shortest_correct, lengths.mean(1, keepdim=True))
    r = cfg.alpha * correct.double() - cfg.beta * (lengths - sol).abs() + length_penalty
    return r, group_normalize(r), {"sol_mean": float(sol.mean())}


class ShorterBetterMethod(Method):
    """ShorterBetter (arXiv 2504.21370): r = α·1[correct] − β·|l − SOL|, SOL = the shortest correct length, or
    the mean of all when none is correct."""

    STATS_KEYS = BASE_STATS + ("sol_mean",)

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "ShorterBetterMethod":
        return cls(cfg.shorter_better)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        r, a, extra = shorter_better(b.correct, b.lengths, self.config, b.length_penalty)
        return finish(b, r, a, extra)
