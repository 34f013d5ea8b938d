"""GRPO-LEAD (Zhang & Zuo, arXiv 2504.09696, EMNLP 2025) §3.1–3.4, paper form by default: R = exp(−α z) for a
correct rollout, −1 otherwise (repetition penalty optional), difficulty reweighting A' = Ã·w(ρ) or Ã·w(1 − ρ);
the reference code's behaviours are `ref_code_*` options. Stateless. See docs/methods.md#equations-grpo-lead.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, GROUP_EPS, finish, group_normalize
from lead_recipes.methods.config import GrpoLeadConfig, RecipeConfig


def difficulty_weight(rho: torch.Tensor | float, cfg: GrpoLeadConfig):
    """w(ρ) = A + (B − A) / (1 + exp(k (ρ − ρ_0))): ≈ B for hard prompts, ≈ A for easy ones."""
    rho = torch.as_tensor(rho, dtype=torch.float64)
    return cfg.weight_min + (cfg.weight_max - cfg.weight_min) / (1 + torch.exp(cfg.steepness * (rho - cfg.rho0)))


def effective_correct(
    correct: torch.Tensor, truncated: torch.Tensor, think_boxed: torch.Tensor | None, cfg: GrpoLeadConfig
) -> torch.Tensor:
    """The rollouts counted correct [M, G]: graded correct and not truncated (paper), or, with
    `ref_code_format_failure_enable`, graded correct and not a format failure (the code: truncation itself does not
    matter there; a truncated response has no `</think>` unless it was cut in its answer)."""
    if not cfg.ref_code_format_failure_enable:
        return correct & ~truncated
    if think_boxed is None:
        raise ValueError(
            "--recipe.grpo_lead.ref_code_format_failure_enable needs per-rollout format flags (RolloutBatch."
            'think_boxed: the reward function\'s extra_logs["think_boxed"], or "think_boxed" in each replayed group)'
        )
    return correct & think_boxed


def accuracy_reward(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    truncated: torch.Tensor,
    repetitive: torch.Tensor | None,
    cfg: GrpoLeadConfig,
    think_boxed: torch.Tensor | None = None,
) -> torch.Tensor:
    """R [M, G]: exp(−α z) for a correct rollout, −1 otherwise, with the reference-code options and the
    repetition penalty (docs/methods.md#equations-grpo-lead)."""
    ok = effective_correct(correct, truncated, think_boxed, cfg)
    n_ok = ok.sum(1, keepdim=True)
    mu = torch.where(ok, lengths, 0.0).sum(1, keepdim=True) / n_ok.clamp(min=1)
    dev = torch.where(ok, lengths - mu, 0.0)  # 0 off the correct rollouts: their z is 0, exp(−α z) finite
    sigma = torch.where(n_ok >= 2, (dev.square().sum(1, keepdim=True) / (n_ok - 1).clamp(min=1)).sqrt(), 0.0)
    if cfg.ref_code_sigma_one_enable:
        sigma = torch.where(n_ok >= 2, sigma, 1.0)
    shaped = torch.exp(-cfg.alpha * dev / (sigma + GROUP_EPS))
    if cfg.ref_code_length_gate_enable:  # length shaping only when the 3 shortest responses average above the gate
        shortest3 = lengths.topk(min(3, lengths.shape[1]), dim=1, largest=False).values.mean(1, keepdim=True)
        shaped = torch.where(shortest3 > cfg.ref_code_length_gate_tokens, shaped, 1.0)
    r = torch.where(ok, shaped, -1.0)
    # who the repetition penalty can hit: every incorrect rollout (paper), only format failures (the code)
    penalisable = ~ok
    if cfg.ref_code_format_failure_enable:  # the code's remap: format failure 0, completed wrong answer −1
        penalisable = ~think_boxed
        r = torch.where(penalisable, 0.0, r)
    if cfg.repetition_penalty_enable:
        if repetitive is None:
            raise ValueError(
                "--recipe.grpo_lead.repetition_penalty_enable needs per-rollout repetition flags "
                "(RolloutBatch.repetitive, from lead_recipes.grading.repetition.is_repetitive)"
            )
        r = torch.where(repetitive & penalisable, cfg.repetition_reward, r)
    return r


def difficulty_reweight(a: torch.Tensor, rho: torch.Tensor, cfg: GrpoLeadConfig) -> torch.Tensor:
    """A' = Ã·w(ρ) if Ã > 0 else Ã·w(1 − ρ), with ρ [M, 1] the fraction of each prompt's rollouts counted correct."""
    return torch.where(a > 0, a * difficulty_weight(rho, cfg), a * difficulty_weight(1 - rho, cfg))


def grpo_lead(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    truncated: torch.Tensor,
    repetitive: torch.Tensor | None,
    cfg: GrpoLeadConfig,
    length_penalty=0.0,
    think_boxed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Returns (rewards R + the length penalty, advantages A', statistics) for a validated batch."""
    r = accuracy_reward(correct, lengths, truncated, repetitive, cfg, think_boxed) + length_penalty
    ok = effective_correct(correct, truncated, think_boxed, cfg)
    rho = ok.double().mean(1, keepdim=True)
    adv = difficulty_reweight(group_normalize(r), rho, cfg)
    rejected = torch.zeros_like(rho, dtype=torch.bool)
    if cfg.ref_code_rejection_enable:  # no rollout with a positive reward, or every reward exactly 1
        rejected = ~(r > 0).any(1, keepdim=True) | (r == 1).all(1, keepdim=True)
        adv = torch.where(rejected, 0.0, adv)
    penalisable = ~think_boxed if cfg.ref_code_format_failure_enable else ~ok
    penalised = repetitive & penalisable if cfg.repetition_penalty_enable else torch.zeros_like(ok)
    return (
        r,
        adv,
        {
            "correct_reward_mean": float(r[ok].mean()) if ok.any() else 0.0,
            "difficulty_rho_mean": float(ok.double().mean()),
            "repetition_penalised_frac": float(penalised.double().mean()),
            "rejected_groups": float(rejected.sum()),
        },
    )


class GrpoLeadMethod(Method):
    """GRPO-LEAD (arXiv 2504.09696) §3.1–3.3: R = exp(−α z) if correct, −1 otherwise; A' = Ã·w(ρ) if Ã > 0
    else Ã·w(1−ρ), w(ρ) = A + (B−A)/(1+e^{k(ρ−ρ0)})."""

    STATS_KEYS = BASE_STATS + (
        "correct_reward_mean",
        "difficulty_rho_mean",
        "repetition_penalised_frac",
        "rejected_groups",
    )

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "GrpoLeadMethod":
        return cls(cfg.grpo_lead)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        r, a, extra = grpo_lead(
            b.correct, b.lengths, b.truncated, b.repetitive, self.config, b.length_penalty, b.think_boxed
        )
        return finish(b, r, a, extra)
