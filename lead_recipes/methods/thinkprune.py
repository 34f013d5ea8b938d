"""ThinkPrune (Hou et al., arXiv 2504.01296): R = 1[correct ∧ ¬truncated ∧ l ≤ L] (the abstract: an unfinished
answer beyond the token limit L gets zero reward), then GRPO; each round of the authors' 4000 → 3000 → 2000
schedule is its own run with L as the generation cap. Stateless. See docs/methods.md#equations-thinkprune.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import RecipeConfig


def thinkprune(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    truncated: torch.Tensor,
    limit: float,
    grade_truncated: bool,
    length_penalty=0.0,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """R [M, G] and A. With `grade_truncated` (the authors' code) R = 1[correct] whatever the length.
    Returns (rewards, advantages, statistics)."""
    over = truncated | (lengths > limit)
    r = (correct if grade_truncated else correct & ~over).double() + length_penalty
    return r, group_normalize(r), {"limit": float(limit), "over_limit_frac": float(over.double().mean())}


class ThinkPruneMethod(Method):
    """ThinkPrune (arXiv 2504.01296, abstract): R = 1[correct ∧ ¬truncated ∧ l ≤ L], L the round's token limit."""

    STATS_KEYS = BASE_STATS + ("limit", "over_limit_frac")

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "ThinkPruneMethod":
        return cls(cfg.thinkprune)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        c = self.config
        limit = c.limit if c.limit is not None else b.max_new_tokens
        r, a, extra = thinkprune(
            b.correct, b.lengths, b.truncated, limit, c.ref_code_grade_truncated_enable, b.length_penalty
        )
        return finish(b, r, a, extra)
