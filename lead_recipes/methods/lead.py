"""LEAD — Length-Efficient Adaptive and Dynamic reasoning (Wei et al., arXiv 2605.09806).

  (8) L*_q = clamp(agg_{j∈C_q} l_{q,j}, L_min, B_max), or B_max when no rollout of q is correct
      (agg = mean_correct | min_correct | median_correct; mean_all = mean over all G, no sentinel)
  (9) r_l = max(−1, 1 − |l − L*_q| / L*_q)                       for every rollout
  (2) A^(k) = (r_k − μ_q^(k)) / (σ_q^(k) + 1e-6),  k ∈ {c, l}     over all G, unbiased σ
  (4) μ_c, σ_c over all rollouts; μ_l, σ_l over the correct rollouts of solved prompts only, each prompt weighted
      equally (Law of Total Variance, population variances, +1e-8 under the root); M' = 0 ⇒ μ_l = σ_l = 0
      CV_k = σ_k / (|μ_k| + ε);  CṼ_k = CV_k / (CV_c + CV_l + ε)
  (5) P_c = (1 − clamp(μ_c, 0, 1))^α;  P_l = ((1 − clamp(μ_l, −1, 1)) / 2)^α
  (6) Ψ_k = CṼ_k · P_k;   (7) λ̂ = Ψ / (Ψ_c + Ψ_l + ε) → EMA → floor (controllers.LeadController)
  (3) A = BatchWhiten(λ_c A^(c) + λ_l A^(l)),  token-weighted (reference code) or per sequence.
The controller runs on this batch before the combination (same step). Shaped reward reported: λ_c r_c + λ_l r_l.
"""
from __future__ import annotations

import math

import torch

from lead_recipes.methods.controllers import PSI_EPS, LeadController
from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.common import BASE_STATS, as_float, finish, group_normalize, row_sums01, whiten
from lead_recipes.methods.config import LeadConfig, RecipeConfig

CV_EPS = 1e-8
LTV_EPS = 1e-8


def target_lengths(correct: torch.Tensor, lengths: torch.Tensor, b_max: float, aggregator: str,
                   l_min: float) -> torch.Tensor:
    """L*_q [M] (Eq. 8): clamp(raw, L_min, B_max) = max(min(raw, B_max), L_min), as the reference code."""
    cf = as_float(correct)
    n = row_sums01(cf)
    return _target_lengths(correct, cf, n, n.clamp_min(1.0), lengths, b_max, aggregator, l_min)


def _target_lengths(correct, cf, n, n1, lengths, b_max, aggregator, l_min) -> torch.Tensor:
    """target_lengths given cf = 1[correct] as float64, n = cf.sum(1) and n1 = max(n, 1)."""
    b_max, l_min = float(b_max), float(l_min)
    if aggregator == "mean_all":
        raw = lengths.sum(1) / lengths.shape[1]
    elif aggregator == "mean_correct":   # sentinel B_max when nothing is correct
        raw = ((lengths * cf).sum(1) / n1).masked_fill_(n == 0, b_max)
    else:
        if aggregator == "min_correct":
            raw = torch.where(correct, lengths, math.inf).amin(1)
        elif aggregator == "median_correct":
            srt = torch.where(correct, lengths, math.inf).sort(1).values
            k = n.long()
            lo = ((k - 1).clamp(min=0) // 2).unsqueeze(1)
            hi = (k // 2).clamp(max=lengths.shape[1] - 1).unsqueeze(1)
            raw = (srt.gather(1, lo) + srt.gather(1, hi)).squeeze(1) / 2
        else:
            raise ValueError(f"--recipe.lead.aggregator: unknown aggregator {aggregator!r}")
        raw = torch.where(n > 0, raw, b_max)
    if l_min <= b_max:   # then min(max(x, L_min), B_max) = max(min(x, B_max), L_min): one op
        return raw.clamp(l_min, b_max)
    return raw.clamp(max=b_max).clamp(min=l_min)


def efficiency_reward(lengths: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """r_l [M, G] (Eq. 9, `max_sym`): peaks at 1 when l = L*, l/L* below it, clipped at −1 above 3 L*."""
    t = target.unsqueeze(1)
    return torch.rsub((lengths - t).abs_().div_(t), 1.0).clamp_min_(-1.0)


def psi_statistics(correct: torch.Tensor, r_l: torch.Tensor, alpha: float) -> dict[str, float]:
    """Eqs. 4–6 on the raw rewards (not the advantages). Returns the named scalars, Ψ_c and Ψ_l included."""
    cf = as_float(correct)
    n = row_sums01(cf)
    return _psi_statistics(cf, n, n.clamp_min(1.0), r_l, alpha)


def _psi_statistics(cf, n, n1, r_l, alpha) -> dict[str, float]:
    """psi_statistics given cf = 1[correct] as float64, n = cf.sum(1) and n1 = max(n, 1). μ_l,q and v_l,q are
    exactly 0 for unsolved prompts (every term is masked by cf), so sums over solved prompts need no mask."""
    m, g = cf.shape
    mu_qc = n / float(g)
    mu_ql = (r_l * cf).sum(1) / n1
    v_ql = (r_l - mu_ql.unsqueeze(1)).square_().mul_(cf).sum(1) / n1
    # one stacked reduction; popvar of a {0,1} row is μ(1 − μ); between-prompt variance as E[μ_q²] − μ² (≥ 0)
    s = torch.stack([mu_qc, mu_qc * torch.rsub(mu_qc, 1.0), mu_qc.square(), mu_ql, v_ql, mu_ql.square()]).sum(1)
    s = s.tolist()
    mu_c = s[0] / m
    sigma_c = math.sqrt(s[1] / m + max(s[2] / m - mu_c * mu_c, 0.0) + LTV_EPS)
    n_solved = int(n.count_nonzero())
    if n_solved == 0:
        mu_l = sigma_l = 0.0
    else:  # efficiency: correct rollouts of solved prompts only, each solved prompt weighted equally
        mu_l = s[3] / n_solved
        sigma_l = math.sqrt(s[4] / n_solved + max(s[5] / n_solved - mu_l * mu_l, 0.0) + LTV_EPS)
    cv_c = sigma_c / (abs(mu_c) + CV_EPS)
    cv_l = sigma_l / (abs(mu_l) + CV_EPS)
    cvt_c = cv_c / (cv_c + cv_l + PSI_EPS)
    cvt_l = cv_l / (cv_c + cv_l + PSI_EPS)
    p_c = (1.0 - min(max(mu_c, 0.0), 1.0)) ** alpha
    p_l = ((1.0 - min(max(mu_l, -1.0), 1.0)) / 2.0) ** alpha
    return {"solved_prompts": float(n_solved), "mu_c": mu_c, "sigma_c": sigma_c, "mu_l": mu_l,
            "sigma_l": sigma_l, "cv_c": cv_c, "cv_l": cv_l, "cvt_c": cvt_c, "cvt_l": cvt_l,
            "potential_c": p_c, "potential_l": p_l, "psi_c": cvt_c * p_c, "psi_l": cvt_l * p_l}


def lead(correct: torch.Tensor, lengths: torch.Tensor, b_max: float, cfg: LeadConfig,
         controller: LeadController, length_sum: float | None = None
         ) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """One LEAD step on a validated batch. Advances `controller` (its only side effect). `length_sum` =
    float(lengths.sum()) if the caller has it. Returns (rewards λ_c r_c + λ_l r_l, advantages, statistics)."""
    r_c = as_float(correct)
    n = row_sums01(r_c)
    n1 = n.clamp_min(1.0)
    target = _target_lengths(correct, r_c, n, n1, lengths, b_max, cfg.aggregator, cfg.l_min)
    r_l = efficiency_reward(lengths, target)
    stats = _psi_statistics(r_c, n, n1, r_l, cfg.alpha)
    stats.update(controller.update(stats["psi_c"], stats["psi_l"]))
    lam_c, lam_l = controller.lambda_c, controller.lambda_l
    a_c, a_l = group_normalize(torch.stack([r_c, r_l]))     # both channels in one pass (Eq. 2)
    combined = a_c.mul_(lam_c).add_(a_l.mul_(lam_l))    # λ_c A^c + λ_l A^l, in place
    adv, w_mean, w_std = whiten(combined, lengths, cfg.whiten, length_sum)
    numel = r_c.numel()   # means as sum / count, which is what Tensor.mean computes
    stats.update({"ema_w_c": controller.w_c, "ema_w_l": controller.w_l, "lambda_c": lam_c, "lambda_l": lam_l,
                  "target_length_mean": float(target.sum()) / target.numel(),
                  "reward_c_mean": float(n.sum()) / numel, "reward_l_mean": float(r_l.sum()) / numel,
                  "whiten_mean": w_mean, "whiten_std": w_std})
    return r_c.mul_(lam_c).add_(r_l.mul_(lam_l)), adv, stats     # λ_c r_c + λ_l r_l (r_c, r_l are done)


class LeadMethod(Method):
    name = "lead"
    STATS_KEYS = BASE_STATS + (
        "solved_prompts", "mu_c", "sigma_c", "mu_l", "sigma_l", "cv_c", "cv_l", "cvt_c", "cvt_l", "potential_c",
        "potential_l", "psi_c", "psi_l", "target_lambda_c", "target_lambda_l", "ema_skipped", "ema_w_c", "ema_w_l",
        "lambda_c", "lambda_l", "target_length_mean", "reward_c_mean", "reward_l_mean", "whiten_mean",
        "whiten_std")

    def __init__(self, config: LeadConfig):
        super().__init__(config)
        self.controller = LeadController(beta_ema=config.beta_ema, lambda_min=config.lambda_min,
                                         static_lambda_c=config.static_lambda_c,
                                         decay_on_zero_psi=config.ref_code_psi_decay_enable)

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "LeadMethod":
        return cls(cfg.lead)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        length_sum = float(b.lengths.sum())
        r, a, extra = lead(b.correct, b.lengths, self.config.b_max or b.max_new_tokens, self.config,
                           self.controller, length_sum)
        return finish(b, r, a, extra, length_sum=length_sum)

    def _controller_state(self) -> dict:
        return self.controller.state_dict()

    def _load_controller_state(self, state: dict | None) -> None:
        self.controller.load_state_dict(state)
