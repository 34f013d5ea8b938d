"""Arora & Zanette, "Training Language Models to Reason Efficiently" (arXiv 2502.04463; equation from the authors'
project page, Fig. 4, and reward server): R = ĉ·(1 − α·σ((l − μ_q)/(s_q + 1e-7))), μ_q and s_q over the group's
effective-correct lengths (ĉ = correct ∧ ¬truncated), then GRPO (or the authors' RLOO + token-level whitening).
Stateless. See docs/methods.md#equations-arora-zanette.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.baseline_config import AroraZanetteConfig
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import RecipeConfig

STD_EPS = 1e-7  # authors' reward server (math_server.py): added to the std


def rloo(r: torch.Tensor) -> torch.Tensor:
    """r − mean of the group's other rewards (RLOO), per row."""
    g = r.shape[1]
    return r - (r.sum(1, keepdim=True) - r) / (g - 1)


def fork_whiten(a: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The authors' OpenRLHF fork's advantage whitening: every rollout's scalar counted once per response token,
    (a − μ̄)·rsqrt(clamp(σ̄², min = 1e-8)) with the population (token-count) variance."""
    n = lengths.sum()
    mean = (lengths * a).sum() / n
    var = (lengths * (a - mean).square()).sum() / n
    return (a - mean) * var.clamp(min=1e-8).rsqrt()


def arora_zanette(
    ok: torch.Tensor, lengths: torch.Tensor, cfg: AroraZanetteConfig, length_penalty=0.0
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """R and A from the effective correctness `ok` [M, G]. Returns (rewards, advantages, statistics)."""
    n = ok.sum(1, keepdim=True)
    mu = torch.where(ok, lengths, 0.0).sum(1, keepdim=True) / n.clamp(min=1)
    sq = torch.where(ok, (lengths - mu).square(), 0.0).sum(1, keepdim=True)
    # one correct rollout: sq = 0, so s = 0 and z = 0 (R = 1 − α/2) for either std, as the authors' np.std gives
    s = (sq / (n if cfg.std == "population" else n - 1).clamp(min=1)).sqrt()
    penalty = cfg.alpha * torch.sigmoid((lengths - mu) / (s + STD_EPS))
    r = torch.where(ok, 1.0 - penalty, 0.0) + length_penalty
    if cfg.ref_code_rloo_whiten_enable:
        adv = fork_whiten(rloo(r), lengths)
    else:
        adv = group_normalize(r)
    n_ok = int(ok.sum())
    return (
        r,
        adv,
        {
            "effective_accuracy": float(ok.double().mean()),
            "length_penalty_mean": float(torch.where(ok, penalty, 0.0).sum()) / n_ok if n_ok else 0.0,
        },
    )


class AroraZanetteMethod(Method):
    """Arora & Zanette (arXiv 2502.04463, project page Fig. 4): R = ĉ·(1 − α·σ((l − μ_q)/σ_q)), μ_q, σ_q over the
    group's correct lengths, ĉ = correct ∧ ¬truncated."""

    STATS_KEYS = BASE_STATS + ("effective_accuracy", "length_penalty_mean")

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "AroraZanetteMethod":
        return cls(cfg.arora_zanette)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        ok = b.correct if self.config.grade_truncated_enable else b.correct & ~b.truncated
        r, a, extra = arora_zanette(ok, b.lengths, self.config, b.length_penalty)
        return finish(b, r, a, extra)
