"""Every method's hyperparameters, with their defaults, written down once (choices explained in docs/methods.md).

One frozen dataclass per method; `lead_recipes.flags` turns each field into a `--recipe.<section>.<field>` flag, so
the defaults here are the defaults of the training CLI, `lead-recipes replay` and the recipes. Field metadata:
`help` (shown by --help; says the paper value and, where it differs, the reference-code value) and, for strings,
`choices`. Booleans end in `_enable` and default to False. This module is torch-free on purpose (the launcher
validates recipes on machines without the training stack); it holds no method math.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from lead_recipes.guard import GuardConfig


def _f(default, help: str, choices: tuple[str, ...] | None = None):
    meta = {"help": help}
    if choices is not None:
        meta["choices"] = choices
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class GrpoConfig:
    """GRPO on correctness only: no hyperparameters beyond the shared ε = 1e-6."""


LENGTH_REWARDS = ("conditioned", "classic", "lead")


@dataclass(frozen=True)
class ScalarizedConfig:
    """LEAD's scalarised GRPO baseline (arXiv 2605.09806, Table 2): R = w_c·1[correct] + w_l·r_len, then group
    normalisation."""
    correct_weight: float = _f(0.5, "weight w_c on 1[correct] (LEAD sweep: λ1 = 1/(1+ratio); paper best 1:1)")
    length_weight: float = _f(0.5, "weight w_l on the length reward (paper best 1:1 ⇒ 0.5)")
    length_reward: str = _f("conditioned", "conditioned = 1[correct ∧ l ≤ T] (LEAD Table-1 script); classic = "
                            "1[l ≤ T]; lead = LEAD's r_l (Eq. 9, uses --recipe.lead.aggregator/l_min)",
                            LENGTH_REWARDS)
    length_threshold: float = _f(2000.0, "T in tokens for conditioned/classic (reference code: 2000, counted as "
                                 "chars/4 there; here real response tokens)")


@dataclass(frozen=True)
class GdpoConfig:
    """GDPO (arXiv 2601.05242): per-channel group normalisation, static weights, batch whitening."""
    correct_weight: float = _f(1.0, "weight on the correctness channel's advantage (verl snippet: unweighted sum)")
    length_weight: float = _f(1.0, "weight on the length channel's advantage")
    length_reward: str = _f("conditioned", "length channel: conditioned / classic / lead (see grpo_scalarized)",
                            LENGTH_REWARDS)
    length_threshold: float = _f(2000.0, "T in tokens for conditioned/classic length rewards")
    whiten: str = _f("token", "batch whitening: token (verl masked_whiten, LEAD's re-implementation) or sequence "
                     "(TRL)", ("token", "sequence"))


AGGREGATORS = ("mean_correct", "min_correct", "median_correct", "mean_all")


@dataclass(frozen=True)
class LeadConfig:
    """LEAD (arXiv 2605.09806): decoupled normalisation, PSI controller, symmetric target-length reward."""
    aggregator: str = _f("mean_correct", "L*_q aggregator (paper/code: mean_correct; Table-3 ablations: "
                         "min_correct, median_correct, mean_all)", AGGREGATORS)
    l_min: float = _f(1000.0, "L_min clamp on L*_q in tokens (paper and code: 1000, hard-coded there)")
    b_max: int | None = _f(None, "B_max in tokens; default: the rollout max_new_tokens (paper: 4000; code main "
                           "script: 8000)")
    alpha: float = _f(1.0, "potential exponent α (code: 1.0)")
    beta_ema: float = _f(0.95, "EMA factor β_ema (code: 0.95; paper: 0.9–0.95)")
    lambda_min: float = _f(0.3, "floor on λ_c (code: 0.3)")
    static_lambda_c: float | None = _f(None, "constant λ_c (λ_l = 1-λ_c), no controller: the 'LEAD static' "
                                       "ablation (code: lead_static_lambda_corr)")
    whiten: str = _f("token", "BatchWhiten statistics: token (reference code, verl masked_whiten) or sequence",
                     ("token", "sequence"))
    ref_code_psi_decay_enable: bool = _f(False, "reference-code behaviour: when Ψ_c = Ψ_l = 0, still run the EMA "
                                         "toward (0, 0) (default: skip that step's update)")


@dataclass(frozen=True)
class GrpoLeadConfig:
    """GRPO-LEAD (arXiv 2504.09696): length-dependent accuracy reward, −1 for wrong, difficulty-aware reweighting."""
    alpha: float = _f(0.05, "α in exp(−α z) (paper and code: 0.05); 0 turns the length reward off (stage 2)")
    weight_min: float = _f(0.4, "A, the lower asymptote of w(ρ) (paper: 0.4)")
    weight_max: float = _f(1.5, "B, the upper asymptote of w(ρ) (paper: 1.5)")
    rho0: float = _f(0.75, "ρ_0, the midpoint of w(ρ) (paper: 0.75)")
    steepness: float = _f(10.0, "k, the steepness of w(ρ) (paper: 10)")
    repetition_penalty_enable: bool = _f(False, "stage 2: incorrect repetitive responses (authors' code detector) get "
                                         "--recipe.grpo_lead.repetition_reward")
    repetition_reward: float = _f(-1.5, "reward of a repetitive incorrect response (paper: −1.5; code: −2)")
    ref_code_length_gate_enable: bool = _f(False, "reference-code behaviour: shape correct rewards only when the "
                                           "mean of the 3 shortest lengths in the group exceeds the gate")
    ref_code_length_gate_tokens: float = _f(4000.0, "the gate for ref_code_length_gate_enable (code: 4000)")
    ref_code_truncated_zero_enable: bool = _f(False, "reference-code behaviour: truncated (format-failed) responses"
                                              " get 0 instead of the paper's −1")
    ref_code_sigma_one_enable: bool = _f(False, "reference-code behaviour: σ := 1 when fewer than 2 correct "
                                         "(paper: σ := 0; both give z = 0)")
    ref_code_rejection_enable: bool = _f(False, "reference-code behaviour: reject groups with no positive reward "
                                         "or all rewards exactly 1 (their advantages are set to 0)")


@dataclass(frozen=True)
class LeashConfig:
    """Leash (arXiv 2512.21540): clipped one-sided length penalty with an Adam-updated Lagrange multiplier (the
    optimiser settings are our choice, see docs/methods.md)."""
    target_length: float = _f(4096.0, "L_t in tokens (paper, 1.5B: 4096)")
    lr: float = _f(1e-2, "Adam learning rate η_λ for λ (reconstructed; paper value unknown)")
    lambda_init: float = _f(0.0, "λ_0 (reconstructed)")
    lambda_min: float = _f(0.0, "projection lower bound λ_min (reconstructed)")
    lambda_max: float = _f(1.0, "projection upper bound λ_max (reconstructed)")
    adam_beta1: float = _f(0.9, "Adam β1")
    adam_beta2: float = _f(0.999, "Adam β2")
    adam_eps: float = _f(1e-8, "Adam ε")
    constant_lambda_enable: bool = _f(False, "Leash-C ablation: keep λ = lambda_init, no dual update")


@dataclass(frozen=True)
class ShorterBetterConfig:
    """ShorterBetter (arXiv 2504.21370): r = α·1[correct] − β·|l − SOL|."""
    alpha: float = _f(2.0, "α, the correctness reward (paper and code: 2.0; paper also reports 1.0)")
    beta: float = _f(0.001, "β, the per-token distance penalty (code: 0.001)")


COMPOSED_CORRECT = ("binary", "signed", "grpo_lead")


@dataclass(frozen=True)
class ComposedConfig:
    """The composed method: which parts of LEAD, GRPO-LEAD and Leash are on. Each part's own hyperparameters are
    read from its method's section (--recipe.lead.*, --recipe.grpo_lead.*, --recipe.leash.*), never duplicated."""
    correct_reward: str = _f("binary", "correctness channel: binary = 1[correct] (LEAD), signed = ±1 (Leash/DAPO), "
                             "grpo_lead = exp(−α z) if correct else −1 (GRPO-LEAD, --recipe.grpo_lead.*)",
                             COMPOSED_CORRECT)
    length_reward: str = _f("lead", "length channel: lead = LEAD's r_l with PSI (or static) weights and BatchWhiten "
                            "(--recipe.lead.*); none = the correctness channel alone, plain group normalisation",
                            ("lead", "none"))
    difficulty: str = _f("grpo_lead", "grpo_lead = GRPO-LEAD's logistic reweighting w(ρ) / w(1 − ρ) of the combined "
                         "advantage (--recipe.grpo_lead.weight_min/weight_max/rho0/steepness); none = off",
                         ("grpo_lead", "none"))
    budget: str = _f("leash", "leash = a Lagrange multiplier λ (Adam, --recipe.leash.lr/lambda_*/adam_*) that adds "
                     "−λ·max(0, l/L_t − 1) to the length channel (to the correctness channel when there is none); "
                     "none = off", ("leash", "none"))
    budget_tokens: float | None = _f(None, "L_t of the budget in tokens; default B_max / 2 (B_max = "
                                     "--recipe.lead.b_max or the rollout max_new_tokens)")


# flag section (the word after --recipe.) -> config class; the section is the method name with '-' → '_', except
# `guard` (stop when grading fails: lead_recipes.guard), which applies to every method
SECTIONS = {
    "grpo_scalarized": ScalarizedConfig,
    "gdpo": GdpoConfig,
    "lead": LeadConfig,
    "grpo_lead": GrpoLeadConfig,
    "leash": LeashConfig,
    "shorter_better": ShorterBetterConfig,
    "composed": ComposedConfig,
    "guard": GuardConfig,
}
