"""The hyperparameters of the length baselines Arora–Zanette, L1-Exact, L1-Max, Kimi k1.5, ThinkPrune, DLER, Laser,
Laser-D, Laser-DE and AdaptThink: one frozen dataclass per `--recipe.<section>.*` section, registered in
methods.config.REGISTRY (kept out of config.py for its size). Torch-free; no method math. Sources and decisions:
docs/methods.md#length-baselines.
"""

from __future__ import annotations

from dataclasses import dataclass

from lead_recipes.methods.fields import option


@dataclass(frozen=True)
class AroraZanetteConfig:
    """Arora & Zanette (arXiv 2502.04463): R = 1[correct]·(1 − α·σ((l − μ)/σ)), μ and σ over the group's correct
    lengths."""

    alpha: float = option(
        0.1, "α (authors' code run_rloo_1.5B.sh / run_rloo_7B.sh: 0.1; the project page also shows 0.2)", ge=0, le=1
    )
    std: str = option(
        "population",
        "std of the correct lengths: population (authors' code, np.std) or sample (the paper's choice is "
        "unverified); one correct rollout ⇒ std 0 ⇒ R = 1 − α/2 either way",
        ("population", "sample"),
    )
    ref_code_rloo_whiten_enable: bool = option(
        False,
        "reference-code behaviour: RLOO advantage (R − mean of the group's other rewards), then token-level "
        "whitening over the batch as their OpenRLHF 0.5.4 fork does it (population variance, clamp(min = 1e-8)), "
        "instead of GRPO as for every baseline; the fork's per-token KL inside the whitening is not reproduced",
    )
    grade_truncated_enable: bool = option(
        False,
        "grade a truncated response on its text and count it in μ, σ (the reward server without --check_eos; "
        "the authors' scripts set it: truncated ⇒ incorrect)",
    )


@dataclass(frozen=True)
class L1ExactConfig:
    """L1-Exact (arXiv 2503.04697, Eq. 1): R = 1[correct] − α·|n_gold − l|, n_gold the prompt's target."""

    alpha: float = option(
        0.0003, "α in Eq. 1 (paper: 0.0003; the authors' original release 294b0b1: 1/3000); also L1-Max's", ge=0
    )


@dataclass(frozen=True)
class L1MaxConfig:
    """L1-Max (arXiv 2503.04697, Eq. 2): R = 1[correct]·clip(α·(n_gold − l) + δ, 0, 1) for prompts asking for at
    most n_gold tokens; Eq. 1 (--recipe.l1_exact.alpha) for the others."""

    alpha: float = option(
        0.001, "α in Eq. 2 (paper: not given; the authors' original release 294b0b1: 1/1000 effective)", gt=0
    )
    delta: float = option(0.5, "δ in Eq. 2 (paper: 0.5)", ge=0, le=1)


@dataclass(frozen=True)
class KimiConfig:
    """Kimi k1.5 length reward (arXiv 2501.12599, Sec. 2.3.3): R = 1[correct] + w·len_reward."""

    weight: float = option(
        0.4,
        "w (report: not given; 0.4 is a third-party port's value, our choice); correct ≥ wrong for every length "
        "iff w ≤ 2",
        ge=0,
    )
    warmup_steps: int = option(
        0,
        "steps with w = 0 before the constant penalty (report: a warm-up of unstated length; 0: the penalty "
        "starts at once, as in a long2short phase)",
        ge=0,
    )
    estimator: str = option(
        "group_norm",
        "advantage: group_norm (GRPO, as for every baseline) or mean_baseline (report Eq. 3: R − mean_g R, no std)",
        ("group_norm", "mean_baseline"),
    )


@dataclass(frozen=True)
class ThinkPruneConfig:
    """ThinkPrune (arXiv 2504.01296): R = 1[correct ∧ finished within L tokens], one round of the 4000 → 3000 → 2000
    schedule per run."""

    limit: int | None = option(
        None,
        "L in tokens; default: the rollout max_new_tokens (authors' code: L is the generation cap, rounds 4000, "
        "3000, 2000)",
        gt=0,
    )
    ref_code_grade_truncated_enable: bool = option(
        False,
        "reference-code behaviour: grade a truncated response on its text (a boxed answer in unfinished "
        "thinking scores 1); the abstract: unfinished answers get zero reward",
    )


@dataclass(frozen=True)
class DlerConfig:
    """DLER (arXiv 2510.15110): the advantage step only. Its truncation scale κ is OpenRLHF's
    `--reward.stop_properly_penalty_coef` (project page: 0; the authors' code: 0.1), set by the recipe dler-1.5b
    with the cap, the dynamic filter, the clip range and the KL loss."""

    ref_code_correct_boost: float = option(
        0.0,
        "reference-code behaviour (verl-dler/dler_slurm.sh, not the root script): add this to the whitened "
        "advantage of every graded-correct rollout, truncated ones included (that script: 0.1)",
        ge=0,
    )


@dataclass(frozen=True)
class LaserBonus:
    """α, the step bonus every Laser variant adds (its one shared hyperparameter; the variants' sections extend it)."""

    alpha: float = option(0.5, "α, the bonus of a correct response with l ≤ L_T (authors' code: 0.5)", ge=0)


@dataclass(frozen=True)
class LaserConfig(LaserBonus):
    """Laser (arXiv 2505.15612; the rule is the authors' code, hkust-nlp/Laser): a step bonus α for a correct,
    well-formatted response within the target length L_T, on Laser's base score."""

    target_length: float = option(
        4096.0, "L_T in tokens (authors' code: one run each at 2048, 4096 and 8192; inclusive ≤)", gt=0
    )


def ref_acc_ok(value) -> bool:
    """A label's `ref_acc` as AdaptThink takes it: a number in [0, 1] (not a bool, not NaN), the rule the method
    applies to the batch (methods.base); the preflight reads every label with it."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


@dataclass(frozen=True)
class LaserDConfig(LaserBonus):
    """Laser-D (arXiv 2505.15612; the rule is the authors' code): Laser's bonus with one target per difficulty
    bucket, chosen on a grid by a monitor pass over the eval dataset (`--eval.dataset`, every `--eval.steps`)."""

    grid_lower: int = option(
        4096,
        "the target grid's lower bound in tokens (grid: it, then steps of grid_step up to grid_upper; the authors' "
        "runs Laser-D-L1024/L2048/L4096; the default is the reference recipe's)",
        gt=0,
    )
    grid_step: int = option(
        1024,
        "the target grid's step in tokens (authors' code constants.py L12-25: 1024); a lower bound below it is "
        "followed by step, 2·step, …",
        gt=0,
    )
    grid_upper: int = option(
        16384,
        "the target grid's upper bound in tokens, ≥ grid_lower (authors' code constants.py L12-25: 16384, their "
        "max response length)",
        gt=0,
    )
    ref_code_remonitor_on_resume_enable: bool = option(
        False,
        "reference-code behaviour: a resumed run re-runs the monitor pass on the resumed weights instead of "
        "restoring the checkpoint's targets (the authors do not save them); default: restore, so a resumed run "
        "equals an uninterrupted one",
    )


@dataclass(frozen=True)
class LaserDeConfig(LaserDConfig):
    """Laser-DE (arXiv 2505.15612; the rule is the authors' code): Laser-D plus α for a wrong, well-formatted
    response longer than its bucket's target."""

    repetition_guard_enable: bool = option(
        False,
        "withhold the exploration bonus from a response Laser's token n-gram detector flags on its token ids (the "
        "intended rule); default off: the released code calls the detector on a tensor, where it never fires",
    )


@dataclass(frozen=True)
class AdaptThinkConfig:
    """AdaptThink (arXiv 2505.13417; the rule is the authors' code, THU-KEG/AdaptThink): R = acc − r̄_ref(q) +
    δ·1[no-think], A = R; the rollout executor forces the first response token, the loss is OpenRLHF's GSPO with the
    first token's old log-prob set to log ρ or log(1 − ρ)."""

    delta: float = option(
        0.05, "δ, the bonus of a no-think rollout (authors' script: 0.05; released models: 0 to 0.1)", ge=0
    )
    rho: float = option(
        0.5,
        "ρ: round(G·ρ) of each prompt's G rollouts are forced to the no-think token, and the first token's old "
        "log-prob is log ρ (no-think) or log(1 − ρ) (authors' script: 0.5)",
        gt=0,
        lt=1,
    )
    nothink_token_id: int = option(
        151649,
        "the token forced first in a no-think rollout (authors' script: 151649, `</think>` of R1-Distill-Qwen)",
        ge=0,
    )
    think_token_id: int = option(
        71486,
        "the token forced first in a thinking rollout (authors' script: 71486, `Alright` of R1-Distill-Qwen)",
        ge=0,
    )
    nothink_cap: int = option(
        4096,
        "response cap of a no-think rollout, forced token included (authors' script: 4096); a thinking rollout's "
        "is --rollout.max_new_tokens (authors' script: 16384)",
        gt=1,
    )
