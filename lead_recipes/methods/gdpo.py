"""GDPO, group reward-decoupled normalisation (Liu et al. 2026, arXiv 2601.05242): each channel (correctness, length)
group-normalised, A = BatchWhiten(w_c A_c + w_l A_l) with static weights. Stateless.
See docs/methods.md#equations-gdpo.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize, whiten
from lead_recipes.methods.config import GdpoConfig, LeadConfig, RecipeConfig
from lead_recipes.methods.grpo import length_channel

TRL_EPS = 1e-4  # TRL's GDPO: added to the group std and to the batch std


def gdpo(
    correct: torch.Tensor, lengths: torch.Tensor, b_max: float, cfg: GdpoConfig, lead: LeadConfig, length_penalty=0.0
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """A_c, A_l and their whitened static combination; the length penalty is part of r_len.
    Returns (rewards w_c r_c + w_l r_len, advantages, statistics)."""
    r_c = correct.double()
    r_len = length_channel(cfg.length_reward, correct, lengths, cfg.length_threshold, b_max, lead) + length_penalty
    if cfg.whiten == "trl":  # TRL: (x − mean)/(std + 1e-4) per group and channel, then over the batch's sequences
        a_c, a_l = group_normalize(r_c, TRL_EPS), group_normalize(r_len, TRL_EPS)
        combined = cfg.correct_weight * a_c + cfg.length_weight * a_l
        w_mean, std = float(combined.mean()), combined.std(correction=1)
        adv, w_std = (combined - w_mean) / (std + TRL_EPS), float(std)
    else:
        a_c, a_l = group_normalize(r_c), group_normalize(r_len)
        adv, w_mean, w_std = whiten(cfg.correct_weight * a_c + cfg.length_weight * a_l, lengths, "token")
    rewards = cfg.correct_weight * r_c + cfg.length_weight * r_len
    return rewards, adv, {"length_reward_mean": float(r_len.mean()), "whiten_mean": w_mean, "whiten_std": w_std}


class GdpoMethod(Method):
    """GDPO (arXiv 2601.05242): A = BatchWhiten(Σ_k w_k GroupNorm(r_k)), k ∈ {correctness, length}."""

    STATS_KEYS = BASE_STATS + ("length_reward_mean", "whiten_mean", "whiten_std")

    def __init__(self, config: GdpoConfig, lead: LeadConfig):
        super().__init__(config)
        self.lead = lead

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "GdpoMethod":
        return cls(cfg.gdpo, cfg.lead)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        b_max = self.lead.b_max or b.max_new_tokens
        r, a, extra = gdpo(b.correct, b.lengths, b_max, self.config, self.lead, b.length_penalty)
        return finish(b, r, a, extra)
