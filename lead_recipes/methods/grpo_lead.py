"""GRPO-LEAD (Zhang & Zuo, arXiv 2504.09696, EMNLP 2025), paper form by default.

  correct:    z = (l − μ) / (σ + 1e-6), μ, σ over the correct rollouts' lengths (unbiased σ; σ := 0 with < 2
              correct ⇒ z = 0);   R = exp(−α z)
  incorrect:  R = −1  (truncated responses count as incorrect: −1 whatever the grader said)
  repetition: R = repetition_reward (paper −1.5) for incorrect repetitive responses, when enabled (stage 2)
  ρ_q = #correct / G;   w(ρ) = A + (B − A) / (1 + exp(k (ρ − ρ_0)))
  Ã = (R − mean_g R) / (std_g R + 1e-6);   A' = Ã·w(ρ) if Ã > 0 else Ã·w(1 − ρ)
Reference-code behaviours (`aeroplanepaper/GRPO-LEAD`) are options, off by default: the 4000-token gate,
0 for truncated, σ := 1 below 2 correct, rejection of degenerate groups (their advantages are set to 0 — the
plug-in cannot drop rows; they still count in a token-mean loss denominator). Stateless.
"""
from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import (BASE_STATS, GROUP_EPS, as_float, finish, group_normalize,
                                         row_sums01)
from lead_recipes.methods.config import GrpoLeadConfig, RecipeConfig


def difficulty_weight(rho: torch.Tensor | float, cfg: GrpoLeadConfig):
    """w(ρ) = A + (B − A) / (1 + exp(k (ρ − ρ_0))): ≈ B for hard prompts, ≈ A for easy ones."""
    rho = torch.as_tensor(rho, dtype=torch.float64)
    return cfg.weight_min + (cfg.weight_max - cfg.weight_min) / (1 + torch.exp(cfg.steepness * (rho - cfg.rho0)))


def accuracy_reward(correct: torch.Tensor, lengths: torch.Tensor, truncated: torch.Tensor,
                    repetitive: torch.Tensor | None, cfg: GrpoLeadConfig
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """The length-dependent accuracy reward R [M, G] (exp(−α z) if correct, −1 otherwise, with the options).
    Returns (R, cf = 1[correct ∧ ¬truncated] as float64, n = cf row sums [M, 1], repetition-penalised count).
    Masks are float 0/1 and selections are blends (x + m·(y − x)): torch.where on bool masks costs ~5× more
    here (bench_methods.py)."""
    c = correct & ~truncated
    g = c.shape[1]
    cf = as_float(c)
    n = row_sums01(cf).unsqueeze(1)
    mu = (lengths * cf).sum(1, keepdim=True) / n.clamp_min(1.0)
    dev = (lengths - mu).mul_(cf)      # 0 for incorrect rollouts, so exp() below never overflows (|z| ≤ √(n−1))
    # dev² is already 0 off the correct rollouts, and the sum is exactly 0 with < 2 correct (σ := 0)
    sigma = ((dev * dev).sum(1, keepdim=True) / (n - 1.0).clamp_min_(1.0)).sqrt_()
    if cfg.ref_code_sigma_one_enable:
        sigma = sigma + (n < 2).to(torch.float64)
    shaped = (-cfg.alpha * dev).div_(sigma + GROUP_EPS).exp_()
    if cfg.ref_code_length_gate_enable:
        shortest3 = lengths.topk(min(3, g), dim=1, largest=False).values.mean(1, keepdim=True)
        shaped = 1 + (shortest3 > cfg.ref_code_length_gate_tokens) * (shaped - 1)
    r = shaped.add_(1.0).mul_(cf).sub_(1.0)          # exp(−α z) if correct else −1
    if cfg.ref_code_truncated_zero_enable:
        r = r * (~truncated)                         # truncated rollouts are never in c: −1 → 0
    penalised_sum = 0.0
    if cfg.repetition_penalty_enable:
        if repetitive is None:
            raise ValueError("--recipe.grpo_lead.repetition_penalty_enable needs per-rollout repetition flags "
                             "(RolloutBatch.repetitive, from lead_recipes.grading.repetition.is_repetitive)")
        penalised = as_float(repetitive & ~c)
        r = r + penalised * (cfg.repetition_reward - r)
        penalised_sum = float(penalised.sum())
    return r, cf, n, penalised_sum


def difficulty_reweight(a: torch.Tensor, n: torch.Tensor, cfg: GrpoLeadConfig) -> torch.Tensor:
    """A' = Ã·w(ρ) if Ã > 0 else Ã·w(1 − ρ), ρ = n / G (n = correct count per row, [M, 1]). Updates `a` in place
    and returns it."""
    rho = n / float(a.shape[1])
    w = difficulty_weight(torch.cat([rho, torch.rsub(rho, 1.0)], 1), cfg)     # [M, 2]: w(ρ), w(1 − ρ)
    w_neg = w[:, 1:]
    positive = a.sign().clamp_min_(0.0)                   # 1[Ã > 0] as float (a compare → bool costs more)
    return a.mul_(positive.mul_(w[:, :1] - w_neg).add_(w_neg))   # Ã·(w(1−ρ) + 1[Ã > 0]·(w(ρ) − w(1−ρ)))


def grpo_lead(correct: torch.Tensor, lengths: torch.Tensor, truncated: torch.Tensor,
              repetitive: torch.Tensor | None, cfg: GrpoLeadConfig) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Returns (rewards, advantages, statistics) for a validated batch."""
    r, cf, n, penalised_sum = accuracy_reward(correct, lengths, truncated, repetitive, cfg)
    g = cf.shape[1]
    adv = difficulty_reweight(group_normalize(r), n, cfg)
    n_rejected = 0.0
    if cfg.ref_code_rejection_enable:
        rejected = ((r > 0).sum(1, keepdim=True) == 0) | ((r == 1).sum(1, keepdim=True) == g)
        adv = adv * (~rejected)
        n_rejected = float(rejected.sum())
    n_correct, numel = float(n.sum()), cf.numel()
    return r, adv, {
        "correct_reward_mean": float((r * cf).sum()) / n_correct if n_correct else 0.0,
        "difficulty_rho_mean": n_correct / numel,
        "repetition_penalised_frac": penalised_sum / numel,
        "rejected_groups": n_rejected,
    }


class GrpoLeadMethod(Method):
    name = "grpo-lead"
    STATS_KEYS = BASE_STATS + ("correct_reward_mean", "difficulty_rho_mean", "repetition_penalised_frac",
                               "rejected_groups")

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "GrpoLeadMethod":
        return cls(cfg.grpo_lead)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        r, a, extra = grpo_lead(b.correct, b.lengths, b.truncated, b.repetitive, self.config)
        return finish(b, r, a, extra)
