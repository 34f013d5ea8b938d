"""The composed method (ours): LEAD's two channels (arXiv 2605.09806 Eqs. 2–9), GRPO-LEAD's difficulty reweighting
(arXiv 2504.09696 §3.3) and a Leash budget (arXiv 2512.21540) on the length channel in one advantage step, each part
switchable (--recipe.composed.*); each part's hyperparameters come from its method's section. Every part off but one
reduces to that method (tests/methods/test_methods_composed.py). See docs/methods.md#composed.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize, whiten
from lead_recipes.methods.config import ComposedConfig, GrpoLeadConfig, LeadConfig, LeashConfig, RecipeConfig
from lead_recipes.methods.controllers import ComposedController, LeadController, LeashController
from lead_recipes.methods.grpo_lead import accuracy_reward, difficulty_reweight, effective_correct
from lead_recipes.methods.lead import PSI_STATS, length_reward, psi_statistics
from lead_recipes.methods.leash import length_excess

EXTRA_STATS = PSI_STATS + (
    "lambda_c",
    "lambda_l",
    "target_length_mean",
    "reward_c_mean",
    "reward_l_mean",
    "whiten_mean",
    "whiten_std",
    "difficulty_rho_mean",
    "budget_tokens",
    "constraint",
    "over_target_frac",
    "clipped_frac",
    "budget_penalty_mean",
)


def composed(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    truncated: torch.Tensor,
    repetitive: torch.Tensor | None,
    think_boxed: torch.Tensor | None,
    b_max: float,
    budget_tokens: float,
    lam: float,
    parts: ComposedConfig,
    lead_cfg: LeadConfig,
    grpo_lead_cfg: GrpoLeadConfig,
    psi: LeadController,
    length_penalty=0.0,
) -> tuple[torch.Tensor, torch.Tensor, float, dict[str, float]]:
    """One composed step on a validated batch with budget multiplier `lam` (λ_t); OpenRLHF's `length_penalty` goes
    on the length channel (on the correctness reward without one), after the budget's clip. Advances `psi` when the
    length channel is on (its only side effect). Returns (rewards, advantages, ĝ for the dual update, statistics)."""
    stats = dict.fromkeys(EXTRA_STATS, 0.0)
    # correctness channel: ok, r_c and the reward of a wrong answer
    if parts.correct_reward == "grpo_lead":
        ok = effective_correct(correct, truncated, think_boxed, grpo_lead_cfg)
        r_c, r_wrong = accuracy_reward(correct, lengths, truncated, repetitive, grpo_lead_cfg, think_boxed), -1.0
    elif parts.correct_reward == "signed":
        ok = correct
        r_c, r_wrong = 2.0 * correct.double() - 1.0, -1.0
    else:
        ok = correct
        r_c, r_wrong = correct.double(), 0.0
    # budget: p = λ_t · max(0, l/L_t − 1); 0 when the budget is off
    penalty, g_hat = torch.zeros_like(r_c), 0.0
    if parts.budget == "leash":
        excess = length_excess(lengths, budget_tokens)
        g_hat = float(excess.mean())
        penalty = lam * excess.clamp(min=0.0)
        stats.update(
            budget_tokens=float(budget_tokens),
            constraint=g_hat,
            over_target_frac=float((excess > 0).double().mean()),
            budget_penalty_mean=float(penalty.mean()),
        )
    if parts.length_reward == "lead":
        r_lead, target = length_reward(ok, lengths, b_max, lead_cfg)
        unclipped = r_lead - penalty
        r_l = unclipped.clamp(min=-1.0) + length_penalty
        stats["clipped_frac"] = float((unclipped < -1.0).double().mean())
        stats.update(psi_statistics(ok, r_l, lead_cfg.alpha))  # on the reward the policy is trained on
        stats.update(psi.update(stats["psi_c"], stats["psi_l"]))
        lam_c, lam_l = psi.lambda_c, psi.lambda_l
        adv = lam_c * group_normalize(r_c) + lam_l * group_normalize(r_l)
        rewards = lam_c * r_c + lam_l * r_l
        stats.update(
            lambda_c=lam_c, lambda_l=lam_l, target_length_mean=float(target.mean()), reward_l_mean=float(r_l.mean())
        )
    else:
        unclipped = r_c - penalty
        floor = r_c.clamp(max=r_wrong)
        rewards = torch.maximum(unclipped, floor) + length_penalty
        stats["clipped_frac"] = float((unclipped < floor).double().mean())
        adv = group_normalize(rewards)
        stats.update(lambda_c=1.0, lambda_l=0.0)
    stats["reward_c_mean"] = float(r_c.mean())
    if parts.difficulty == "grpo_lead":
        adv = difficulty_reweight(adv, ok.double().mean(1, keepdim=True), grpo_lead_cfg)
        stats["difficulty_rho_mean"] = float(ok.double().mean())
    if parts.length_reward == "lead":
        adv, stats["whiten_mean"], stats["whiten_std"] = whiten(adv, lengths, lead_cfg.whiten)
    return rewards, adv, g_hat, stats


class ComposedMethod(Method):
    """Ours: LEAD's two channels (arXiv 2605.09806 Eqs. 2–9) + GRPO-LEAD's w(ρ) (arXiv 2504.09696 §3.3) + a
    Leash budget (arXiv 2512.21540) −λ·max(0, l/L_t − 1) on the length channel, each part switchable."""

    STATS_KEYS = BASE_STATS + EXTRA_STATS + ("lagrange_lambda", "lagrange_lambda_next")

    def __init__(self, config: ComposedConfig, lead: LeadConfig, grpo_lead: GrpoLeadConfig, leash: LeashConfig):
        super().__init__(config)
        self.lead, self.grpo_lead, self.leash = lead, grpo_lead, leash
        self.controller = ComposedController(
            psi=LeadController(
                beta_ema=lead.beta_ema,
                lambda_min=lead.lambda_min,
                static_lambda_c=lead.static_lambda_c,
                skip_on_zero_psi=lead.zero_psi_skip_enable,
            ),
            dual=LeashController(
                lr=leash.lr,
                beta1=leash.adam_beta1,
                beta2=leash.adam_beta2,
                eps=leash.adam_eps,
                lambda_min=leash.lambda_min,
                lambda_max=leash.lambda_max,
                constant=leash.constant_lambda_enable,
                lam=leash.lambda_init,
            ),
        )

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "ComposedMethod":
        return cls(cfg.composed, cfg.lead, cfg.grpo_lead, cfg.leash)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        b_max = self.lead.b_max or b.max_new_tokens
        budget = self.config.budget_tokens or b_max / 2.0
        budget_on = self.config.budget == "leash"
        lam = self.controller.dual.lam if budget_on else 0.0
        r, a, g_hat, extra = composed(
            b.correct,
            b.lengths,
            b.truncated,
            b.repetitive,
            b.think_boxed,
            b_max,
            budget,
            lam,
            self.config,
            self.lead,
            self.grpo_lead,
            self.controller.psi,
            b.length_penalty,
        )
        extra["lagrange_lambda"] = lam
        extra["lagrange_lambda_next"] = self.controller.dual.update(g_hat) if budget_on else lam
        return finish(b, r, a, extra)
