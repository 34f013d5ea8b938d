"""GRPO-LEAD (Zhang & Zuo, arXiv 2504.09696, EMNLP 2025; spec §2), paper form by default.

  correct:    z = (l − μ) / (σ + 1e-6), μ, σ over the correct rollouts' lengths (unbiased σ; σ := 0 with < 2
              correct ⇒ z = 0);   R = exp(−α z)
  incorrect:  R = −1  (truncated responses count as incorrect: −1 whatever the grader said)
  repetition: R = repetition_reward (paper −1.5) for incorrect repetitive responses, when enabled (stage 2)
  ρ_q = #correct / G;   w(ρ) = A + (B − A) / (1 + exp(k (ρ − ρ_0)))
  Ã = (R − mean_g R) / (std_g R + 1e-6);   A' = Ã·w(ρ) if Ã > 0 else Ã·w(1 − ρ)
Reference-code behaviours (`aeroplanepaper/GRPO-LEAD`, §2.2) are options, off by default: the 4000-token gate,
0 for truncated, σ := 1 below 2 correct, rejection of degenerate groups (their advantages are set to 0 — the
plug-in cannot drop rows; they still count in a token-mean loss denominator). Stateless.
"""
from __future__ import annotations

import torch

from lead_recipes.methods import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, GROUP_EPS, finish, group_normalize
from lead_recipes.methods.config import GrpoLeadConfig


def difficulty_weight(rho: torch.Tensor | float, cfg: GrpoLeadConfig):
    """w(ρ) = A + (B − A) / (1 + exp(k (ρ − ρ_0))): ≈ B for hard prompts, ≈ A for easy ones."""
    rho = torch.as_tensor(rho, dtype=torch.float64)
    return cfg.weight_min + (cfg.weight_max - cfg.weight_min) / (1 + torch.exp(cfg.steepness * (rho - cfg.rho0)))


def grpo_lead(correct: torch.Tensor, lengths: torch.Tensor, truncated: torch.Tensor,
              repetitive: torch.Tensor | None, cfg: GrpoLeadConfig) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Returns (rewards, advantages, statistics) for a validated batch."""
    c = correct & ~truncated
    g = c.shape[1]
    n = c.sum(1, keepdim=True)
    cf = c.to(torch.float64)
    mu = (lengths * cf).sum(1, keepdim=True) / n.clamp(min=1)
    var = ((lengths - mu).square() * cf).sum(1, keepdim=True) / (n - 1).clamp(min=1)
    sigma = torch.where(n >= 2, var.sqrt(), 1.0 if cfg.ref_code_sigma_one_enable else 0.0)
    shaped = torch.exp(-cfg.alpha * (lengths - mu) / (sigma + GROUP_EPS))
    if cfg.ref_code_length_gate_enable:
        shortest3 = lengths.topk(min(3, g), dim=1, largest=False).values.mean(1, keepdim=True)
        shaped = torch.where(shortest3 > cfg.ref_code_length_gate_tokens, shaped, 1.0)
    r = torch.where(c, shaped, -1.0)
    if cfg.ref_code_truncated_zero_enable:
        r = torch.where(truncated, 0.0, r)
    penalised = torch.zeros_like(c)
    if cfg.repetition_penalty_enable:
        if repetitive is None:
            raise ValueError("--recipe.grpo_lead.repetition_penalty_enable needs per-rollout repetition flags "
                             "(RolloutBatch.repetitive, from lead_recipes.repetition.is_repetitive)")
        penalised = repetitive & ~c
        r = torch.where(penalised, cfg.repetition_reward, r)
    rho = n.squeeze(1).to(torch.float64) / g
    a = group_normalize(r)
    w_pos, w_neg = difficulty_weight(rho, cfg).unsqueeze(1), difficulty_weight(1 - rho, cfg).unsqueeze(1)
    adv = torch.where(a > 0, a * w_pos, a * w_neg)
    rejected = torch.zeros(c.shape[0], dtype=torch.bool)
    if cfg.ref_code_rejection_enable:
        rejected = (r <= 0).all(1) | (r == 1).all(1)
        adv = adv.masked_fill(rejected.unsqueeze(1), 0.0)
    shaped_correct = r[c]
    return r, adv, {
        "correct_reward_mean": float(shaped_correct.mean()) if shaped_correct.numel() else 0.0,
        "difficulty_rho_mean": float(rho.mean()),
        "repetition_penalised_frac": float(penalised.to(torch.float64).mean()),
        "rejected_groups": float(rejected.to(torch.float64).sum()),
    }


class GrpoLeadMethod(Method):
    name = "grpo-lead"
    STATS_KEYS = BASE_STATS + ("correct_reward_mean", "difficulty_rho_mean", "repetition_penalised_frac",
                               "rejected_groups")

    @classmethod
    def from_recipe(cls, ns) -> "GrpoLeadMethod":
        return cls(GrpoLeadConfig(**vars(ns.grpo_lead)))

    def _step(self, b: RolloutBatch) -> MethodOutput:
        r, a, extra = grpo_lead(b.correct, b.lengths, b.truncated, b.repetitive, self.config)
        return finish(b, r, a, extra)
