"""GRPO baselines: `grpo`, group normalisation of 1[correct] (Shao et al. 2024, arXiv 2402.03300), and
`grpo-scalarized`, LEAD's scalarised baseline R = w_c·1[correct] + w_l·r_len then group norm (arXiv 2605.09806,
Table 2); the length channels r_len are shared with GDPO. Stateless. See docs/methods.md#equations-grpo.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import LeadConfig, RecipeConfig, ScalarizedConfig


def length_channel(
    kind: str, correct: torch.Tensor, lengths: torch.Tensor, threshold: float, b_max: float, lead: LeadConfig
) -> torch.Tensor:
    """The length reward r_len [M, G] named by `kind`: conditioned, classic or lead (docs/methods.md#equations-grpo)."""
    if kind == "conditioned":
        return (correct & (lengths <= threshold)).double()
    if kind == "classic":
        return (lengths <= threshold).double()
    if kind == "lead":
        from lead_recipes.methods.lead import efficiency_reward, target_lengths

        return efficiency_reward(lengths, target_lengths(correct, lengths, b_max, lead.aggregator, lead.l_min))
    raise ValueError(f"unknown length reward {kind!r}")


def grpo(correct: torch.Tensor, lengths: torch.Tensor, length_penalty=0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain GRPO: rewards = 1[correct] + the length penalty, advantages = group-normalised rewards.
    Returns (rewards, advantages)."""
    r = correct.double() + length_penalty
    return r, group_normalize(r)


def grpo_scalarized(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    b_max: float,
    cfg: ScalarizedConfig,
    lead: LeadConfig,
    length_penalty=0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scalarised GRPO, the length penalty added to the one reward. Returns (rewards, advantages, r_len)."""
    r_len = length_channel(cfg.length_reward, correct, lengths, cfg.length_threshold, b_max, lead)
    r = cfg.correct_weight * correct.double() + cfg.length_weight * r_len + length_penalty
    return r, group_normalize(r), r_len


class GrpoMethod(Method):
    """GRPO group norm (Shao et al. 2024, arXiv 2402.03300): A = (r − mean_g r)/(std_g r + ε), r = 1[correct]."""

    STATS_KEYS = BASE_STATS

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "GrpoMethod":
        return cls(cfg.grpo)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        r, a = grpo(b.correct, b.lengths, b.length_penalty)
        return finish(b, r, a, {})


class ScalarizedMethod(Method):
    """LEAD's GRPO baseline (arXiv 2605.09806, Table 2): R = w_c·1[correct] + w_l·r_len, then group norm."""

    STATS_KEYS = BASE_STATS + ("length_reward_mean",)

    def __init__(self, config: ScalarizedConfig, lead: LeadConfig):
        super().__init__(config)
        self.lead = lead

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "ScalarizedMethod":
        return cls(cfg.grpo_scalarized, cfg.lead)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        b_max = self.lead.b_max or b.max_new_tokens
        r, a, r_len = grpo_scalarized(b.correct, b.lengths, b_max, self.config, self.lead, b.length_penalty)
        return finish(b, r, a, {"length_reward_mean": r_len.mean()})
