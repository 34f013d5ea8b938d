"""DLER, "Doing Length pEnalty Right" (Liu et al., arXiv 2510.15110; the paper body is unverified, the rule is the
project page's and the authors' code's, NVlabs/DLER): R = correctness after OpenRLHF's truncation scaling, A = the
group-centred R whitened over the batch's tokens (verl's REINFORCE++-baseline). The cap, the truncation scale, the
dynamic filter and the clip range are OpenRLHF flags set by the recipe. Stateless. See docs/methods.md#equations-dler.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.baseline_config import DlerConfig
from lead_recipes.methods.common import BASE_STATS, finish, whiten
from lead_recipes.methods.config import RecipeConfig


def dler(
    correct: torch.Tensor, lengths: torch.Tensor, cfg: DlerConfig, length_penalty=0.0
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """R = 1[correct] + the length penalty (OpenRLHF's `--reward.stop_properly_penalty_coef κ` turns a truncated
    rollout's 1 into κ), a = R − mean_g R, A = token-weighted BatchWhiten(a) + boost·1[correct]. Returns (R, A,
    statistics)."""
    r = correct.double() + length_penalty
    shifted = r - r[:, :1]  # as group_normalize: an all-equal group is centred to exactly 0
    centred = shifted - shifted.mean(1, keepdim=True)
    adv, mean, std = whiten(centred, lengths, "token")
    # verl-dler's boost: the score (correctness before the truncation scale) is ≥ 1, truncated rollouts included
    adv = adv + cfg.ref_code_correct_boost * correct.double()
    return r, adv, {"whiten_mean": mean, "whiten_std": std}


class DlerMethod(Method):
    """DLER (arXiv 2510.15110; project page and NVlabs/DLER): R = 1[correct]·(1 − τ(1 − κ)) with κ OpenRLHF's
    stop-properly scale (0 on the project page), A = BatchWhiten_tokens(R − mean_g R)."""

    STATS_KEYS = BASE_STATS + ("whiten_mean", "whiten_std")

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "DlerMethod":
        return cls(cfg.dler)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        r, a, extra = dler(b.correct, b.lengths, self.config, b.length_penalty)
        return finish(b, r, a, extra)
