"""LEAD, Length-Efficient Adaptive and Dynamic reasoning (Wei et al., arXiv 2605.09806), Eqs. 2–9: target length
L*_q (8), efficiency reward r_l (9), decoupled group normalisation (2), PSI statistics and weights (4–7, the EMA in
controllers.LeadController), BatchWhiten of the combination (3). See docs/methods.md#equations-lead.
"""

from __future__ import annotations

import math

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize, whiten
from lead_recipes.methods.config import LeadConfig, RecipeConfig
from lead_recipes.methods.controllers import PSI_EPS, LeadController

CV_EPS = 1e-8
LTV_EPS = 1e-8


def target_lengths(
    correct: torch.Tensor, lengths: torch.Tensor, b_max: float, aggregator: str, l_min: float
) -> torch.Tensor:
    """L*_q [M] (Eq. 8). The clamp is max(min(agg, B_max), L_min), as the reference code (L_min wins if > B_max);
    a prompt with no correct rollout gets the sentinel B_max itself, unclamped (Eq. 8 and the reference code)."""
    b_max, l_min = float(b_max), float(l_min)
    if aggregator == "mean_all":
        return lengths.mean(1).clamp(max=b_max).clamp(min=l_min)
    n_correct = correct.sum(1)
    if aggregator == "mean_correct":
        agg = torch.where(correct, lengths, 0.0).sum(1) / n_correct.clamp(min=1)
    elif aggregator == "min_correct":
        agg = torch.where(correct, lengths, math.inf).amin(1)
    elif aggregator == "median_correct":  # the mean of the two middle values for an even count
        agg = torch.where(correct, lengths, math.nan).nanquantile(0.5, dim=1)
    else:
        raise ValueError(f"--recipe.lead.aggregator: unknown aggregator {aggregator!r}")
    return torch.where(n_correct > 0, agg.clamp(max=b_max).clamp(min=l_min), b_max)


def efficiency_reward(lengths: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """r_l [M, G] (Eq. 9, `max_sym`): l/L* up to L*, 2 − l/L* above it, clipped at −1 from l = 3 L* on."""
    t = target.unsqueeze(1)
    return (1.0 - (lengths - t).abs() / t).clamp(min=-1.0)


def ref_code_reward(
    correct: torch.Tensor, lengths: torch.Tensor, target: torch.Tensor, mode: str, floor_tokens: float
) -> torch.Tensor:
    """r_l [M, G] of the authors' code's other L* modes (`ray_trainer.py`, `lstar_mode`): `ref_code_upper_only` =
    max(−1, min(0, 1 − l/L*)); `ref_code_max_asym` (their yaml default) = max(0, 1 − l/L*) for a correct rollout,
    0 when it is shorter than `floor_tokens`, and clamp(1 − l/L*, −1, 0) for an incorrect one."""
    raw = 1.0 - lengths / target.unsqueeze(1)
    if mode == "ref_code_upper_only":
        return raw.clamp(min=-1.0, max=0.0)
    if mode != "ref_code_max_asym":
        raise ValueError(f"--recipe.lead.length_mode: unknown mode {mode!r}")
    shaped = torch.where(lengths < floor_tokens, 0.0, raw.clamp(min=0.0))
    return torch.where(correct, shaped, raw.clamp(min=-1.0, max=0.0))


def length_reward(
    correct: torch.Tensor, lengths: torch.Tensor, b_max: float, cfg: LeadConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """(r_l [M, G], L* [M]): Eqs. 8–9, or one of the reference code's modes (`--recipe.lead.length_mode`). With
    `unsolved_length = flat` (ours) a group with no correct rollout gets r_l = 1 throughout: the sentinel L* = B_max
    would pay its longest answers (r_l = l/B_max)."""
    target = target_lengths(correct, lengths, b_max, cfg.aggregator, cfg.l_min)
    if cfg.length_mode == "max_sym":
        r_l = efficiency_reward(lengths, target)
    else:
        r_l = ref_code_reward(correct, lengths, target, cfg.length_mode, cfg.ref_code_asym_floor_tokens)
    if cfg.unsolved_length == "flat":
        r_l = torch.where(correct.any(1, keepdim=True), r_l, 1.0)
    return r_l, target


def psi_statistics(correct: torch.Tensor, r_l: torch.Tensor, alpha: float) -> dict[str, float]:
    """Eqs. 4–6 on the raw rewards r_c = 1[correct] and r_l (not on the advantages). Returns the named scalars,
    Ψ_c and Ψ_l included."""
    r_c = correct.double()
    # correctness: every rollout of every prompt; σ_c² = E_q[Var_j r_c] + Var_q[E_j r_c]
    mu_qc = r_c.mean(1)
    mu_c = float(mu_qc.mean())
    sigma_c = math.sqrt(float(r_c.var(1, correction=0).mean() + mu_qc.var(correction=0)) + LTV_EPS)
    # efficiency: the correct rollouts of each solved prompt, each solved prompt weighted equally
    solved = correct.any(1)
    n_solved = int(solved.sum())
    if n_solved == 0:
        mu_l = sigma_l = 0.0
    else:
        c, r = correct[solved], r_l[solved]
        n_correct = c.sum(1, keepdim=True)
        mu_ql = torch.where(c, r, 0.0).sum(1, keepdim=True) / n_correct
        v_ql = torch.where(c, (r - mu_ql).square(), 0.0).sum(1, keepdim=True) / n_correct
        mu_l = float(mu_ql.mean())
        sigma_l = math.sqrt(float(v_ql.mean() + mu_ql.var(correction=0)) + LTV_EPS)
    cv_c = sigma_c / (abs(mu_c) + CV_EPS)
    cv_l = sigma_l / (abs(mu_l) + CV_EPS)
    cvt_c = cv_c / (cv_c + cv_l + PSI_EPS)
    cvt_l = cv_l / (cv_c + cv_l + PSI_EPS)
    p_c = (1.0 - min(max(mu_c, 0.0), 1.0)) ** alpha
    p_l = ((1.0 - min(max(mu_l, -1.0), 1.0)) / 2.0) ** alpha
    return {
        "solved_prompts": float(n_solved),
        "mu_c": mu_c,
        "sigma_c": sigma_c,
        "mu_l": mu_l,
        "sigma_l": sigma_l,
        "cv_c": cv_c,
        "cv_l": cv_l,
        "cvt_c": cvt_c,
        "cvt_l": cvt_l,
        "potential_c": p_c,
        "potential_l": p_l,
        "psi_c": cvt_c * p_c,
        "psi_l": cvt_l * p_l,
    }


def lead(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    b_max: float,
    cfg: LeadConfig,
    controller: LeadController,
    length_penalty=0.0,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """One LEAD step on a validated batch; the length penalty is part of r_l (and so of PSI's statistics).
    Advances `controller` (its only side effect). Returns (rewards λ_c r_c + λ_l r_l, advantages, statistics)."""
    r_c = correct.double()
    r_l, target = length_reward(correct, lengths, b_max, cfg)
    r_l = r_l + length_penalty
    stats = psi_statistics(correct, r_l, cfg.alpha)
    stats.update(controller.update(stats["psi_c"], stats["psi_l"]))
    lam_c, lam_l = controller.lambda_c, controller.lambda_l
    a_c, a_l = group_normalize(r_c), group_normalize(r_l)
    adv, w_mean, w_std = whiten(lam_c * a_c + lam_l * a_l, lengths, cfg.whiten)
    stats.update(
        {
            "ema_w_c": controller.w_c,
            "ema_w_l": controller.w_l,
            "lambda_c": lam_c,
            "lambda_l": lam_l,
            "target_length_mean": float(target.mean()),
            "reward_c_mean": float(r_c.mean()),
            "reward_l_mean": float(r_l.mean()),
            "whiten_mean": w_mean,
            "whiten_std": w_std,
        }
    )
    return lam_c * r_c + lam_l * r_l, adv, stats


# the PSI controller's statistics, logged by every method that runs it (lead, composed)
PSI_STATS = (
    "solved_prompts",
    "mu_c",
    "sigma_c",
    "mu_l",
    "sigma_l",
    "cv_c",
    "cv_l",
    "cvt_c",
    "cvt_l",
    "potential_c",
    "potential_l",
    "psi_c",
    "psi_l",
    "target_lambda_c",
    "target_lambda_l",
    "ema_skipped",
)


class LeadMethod(Method):
    """LEAD (arXiv 2605.09806) Eqs. 2–9: L*_q (8), r_l = max(−1, 1 − |l − L*|/L*) (9), decoupled group norm
    (2), PSI controller (4–7), A = BatchWhiten(λ_c A^c + λ_l A^l) (3)."""

    STATS_KEYS = (
        BASE_STATS
        + PSI_STATS
        + (
            "ema_w_c",
            "ema_w_l",
            "lambda_c",
            "lambda_l",
            "target_length_mean",
            "reward_c_mean",
            "reward_l_mean",
            "whiten_mean",
            "whiten_std",
        )
    )

    def __init__(self, config: LeadConfig):
        super().__init__(config)
        self.controller = LeadController(
            beta_ema=config.beta_ema,
            lambda_min=config.lambda_min,
            static_lambda_c=config.static_lambda_c,
            skip_on_zero_psi=config.zero_psi_skip_enable,
        )

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "LeadMethod":
        return cls(cfg.lead)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        b_max = self.config.b_max or b.max_new_tokens
        r, a, extra = lead(b.correct, b.lengths, b_max, self.config, self.controller, b.length_penalty)
        return finish(b, r, a, extra)
