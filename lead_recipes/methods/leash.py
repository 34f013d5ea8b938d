"""Leash, adaptive length penalty with a Lagrange multiplier (Li et al., arXiv 2512.21540, ACL 2026):
r'' = clip(r − λ_t·max(0, l/L_t − 1), −1, 1), r = ±1, group-normalised; λ by a projected Adam step on the dual
after the batch (controllers.LeashController; its settings are reconstructed). See docs/methods.md#equations-leash.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import LeashConfig, RecipeConfig
from lead_recipes.methods.controllers import LeashController


def length_excess(lengths: torch.Tensor, target_length: float) -> torch.Tensor:
    """l / L_t − 1 [M, G]: the constraint term, positive for a rollout longer than the budget L_t."""
    return lengths / float(target_length) - 1.0


def leash(
    correct: torch.Tensor, lengths: torch.Tensor, target_length: float, lam: float, length_penalty=0.0
) -> tuple[torch.Tensor, torch.Tensor, float, dict[str, float]]:
    """r'' (+ the length penalty, after the clip), A and ĝ_t for multiplier λ_t = `lam`.
    Returns (rewards, advantages, ĝ_t, statistics)."""
    excess = length_excess(lengths, target_length)
    r = 2.0 * correct.double() - 1.0  # +1 if correct else −1
    unclipped = r - lam * excess.clamp(min=0.0)
    shaped = unclipped.clamp(-1.0, 1.0) + length_penalty
    g_hat = float(excess.mean())
    return (
        shaped,
        group_normalize(shaped),
        g_hat,
        {
            "constraint": g_hat,
            "over_target_frac": float((excess > 0).double().mean()),
            "clipped_frac": float((unclipped < -1.0).double().mean()),
        },
    )


class LeashMethod(Method):
    """Leash (arXiv 2512.21540): r'' = clip(r − λ·max(0, l/L_t − 1), −1, 1), r = ±1; dual: Adam on −λ·ĝ,
    ĝ = mean(l/L_t − 1), λ projected to [λ_min, λ_max]."""

    STATS_KEYS = BASE_STATS + (
        "constraint",
        "over_target_frac",
        "clipped_frac",
        "lagrange_lambda",
        "lagrange_lambda_next",
    )

    def __init__(self, config: LeashConfig):
        super().__init__(config)
        self.controller = LeashController(
            lr=config.lr,
            beta1=config.adam_beta1,
            beta2=config.adam_beta2,
            eps=config.adam_eps,
            lambda_min=config.lambda_min,
            lambda_max=config.lambda_max,
            constant=config.constant_lambda_enable,
            lam=config.lambda_init,
        )

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "LeashMethod":
        return cls(cfg.leash)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        lam = self.controller.lam
        r, a, g_hat, extra = leash(b.correct, b.lengths, self.config.target_length, lam, b.length_penalty)
        extra["lagrange_lambda"] = lam
        extra["lagrange_lambda_next"] = self.controller.update(g_hat)
        return finish(b, r, a, extra)
