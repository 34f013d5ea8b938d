"""Kimi k1.5's length reward (Kimi Team, arXiv 2501.12599, Sec. 2.3.3): λ = 0.5 − (l − min_len)/(max_len − min_len)
over all G rollouts of the prompt (0 when all lengths are equal); len_reward = λ if ĉ else min(0, λ);
R = ĉ + w·len_reward, ĉ = correct ∧ ¬truncated, w = 0 during the warm-up; then GRPO or the report's mean baseline.
Its one state is the step count (the warm-up). See docs/methods.md#equations-kimi.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.baseline_config import KimiConfig
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import RecipeConfig
from lead_recipes.methods.controllers import StepCounter


def length_reward(ok: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """len_reward [M, G]: λ for effective-correct rollouts, min(0, λ) for the others."""
    lo, hi = lengths.amin(1, keepdim=True), lengths.amax(1, keepdim=True)
    span = hi - lo
    lam = torch.where(span > 0, 0.5 - (lengths - lo) / torch.where(span > 0, span, 1.0), 0.0)
    return torch.where(ok, lam, lam.clamp(max=0.0))


def kimi(
    ok: torch.Tensor, lengths: torch.Tensor, weight: float, estimator: str, length_penalty=0.0
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """R = ĉ + w·len_reward and its advantage. Returns (rewards, advantages, statistics)."""
    len_r = length_reward(ok, lengths)
    r = ok.double() + weight * len_r + length_penalty
    if estimator == "mean_baseline":  # shifted by the first value first, so an all-equal row is exactly 0
        shifted = r - r[:, :1]
        adv = shifted - shifted.mean(1, keepdim=True)
    else:
        adv = group_normalize(r)
    return (
        r,
        adv,
        {
            "effective_accuracy": float(ok.double().mean()),
            "length_reward_mean": float(len_r.mean()),
            "length_weight": float(weight),
        },
    )


class KimiMethod(Method):
    """Kimi k1.5 (arXiv 2501.12599, Sec. 2.3.3): R = ĉ + w·len_reward, λ = 0.5 − (l − min_len)/(max_len − min_len)
    over the group, len_reward = λ if ĉ else min(0, λ), ĉ = correct ∧ ¬truncated."""

    STATS_KEYS = BASE_STATS + ("effective_accuracy", "length_reward_mean", "length_weight")

    def __init__(self, config: KimiConfig):
        super().__init__(config)
        self.controller = StepCounter()

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "KimiMethod":
        return cls(cfg.kimi)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        c = self.config
        weight = c.weight if self.controller.step >= c.warmup_steps else 0.0
        r, a, extra = kimi(b.correct & ~b.truncated, b.lengths, weight, c.estimator, b.length_penalty)
        self.controller.step += 1
        return finish(b, r, a, extra)
