"""L1 / LCPO (Aggarwal & Welleck, arXiv 2503.04697): a target n_gold per prompt ("Think for n_gold tokens.").
`l1-exact`: R = ĉ − α_e·|n_gold − l| (Eq. 1); `l1-max`: R = ĉ·clip(α_m·(n_gold − l) + δ, 0, 1) (Eq. 2) for prompts
that ask for at most n_gold tokens and Eq. 1 for the others (the paper's dual objective); ĉ = correct ∧ ¬truncated;
then GRPO. Stateless. See docs/methods.md#equations-l1.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.baseline_config import L1ExactConfig, L1MaxConfig
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import RecipeConfig

L1_STATS = BASE_STATS + ("effective_accuracy", "target_mean", "length_error_mean", "max_prompt_frac")


def l1(
    ok: torch.Tensor,
    lengths: torch.Tensor,
    n_gold: torch.Tensor,
    max_mode: torch.Tensor,
    alpha_exact: float,
    alpha_max: float,
    delta: float,
    length_penalty=0.0,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """Eq. 1 for the rows whose `max_mode` [M] is False, Eq. 2 for the others; n_gold [M].
    Returns (rewards, advantages, statistics)."""
    gap = n_gold.unsqueeze(1) - lengths
    exact = ok.double() - alpha_exact * gap.abs()
    at_most = ok.double() * (alpha_max * gap + delta).clamp(0.0, 1.0)
    r = torch.where(max_mode.unsqueeze(1), at_most, exact) + length_penalty
    stats = {
        "effective_accuracy": float(ok.double().mean()),
        "target_mean": float(n_gold.mean()),
        "length_error_mean": float(gap.abs().mean()),
        "max_prompt_frac": float(max_mode.double().mean()),
    }
    return r, group_normalize(r), stats


def targets(b: RolloutBatch, method: str) -> torch.Tensor:
    """The batch's n_gold [M]; ValueError when the data carries none."""
    if b.n_gold is None:
        raise ValueError(
            f"--recipe.method {method} needs a target length per prompt (n_gold, the N of 'Think for N tokens.'), "
            "and this batch has none: train on data built by `lead-recipes data build --l1.mode exact` (or max), "
            "whose labels carry n_gold (docs/methods.md#equations-l1); a replay input gives each group an 'n_gold'"
        )
    return b.n_gold


class L1ExactMethod(Method):
    """L1-Exact (arXiv 2503.04697, Eq. 1): R = ĉ − α·|n_gold − l|, n_gold the prompt's target length, ĉ = correct ∧
    ¬truncated."""

    STATS_KEYS = L1_STATS

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "L1ExactMethod":
        return cls(cfg.l1_exact)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        n_gold = targets(b, self.name)
        if b.l1_max is not None and b.l1_max.any():
            q = int(b.l1_max.nonzero()[0, 0])
            raise ValueError(
                f"prompt {q} asks for at most {n_gold[q].item():g} tokens (L1-Max data), but --recipe.method l1-exact "
                "rewards exact lengths only: train it with --recipe.method l1-max"
            )
        ok = b.correct & ~b.truncated
        max_mode = torch.zeros_like(n_gold, dtype=torch.bool)
        r, a, extra = l1(ok, b.lengths, n_gold, max_mode, self.config.alpha, 1.0, 0.0, b.length_penalty)
        return finish(b, r, a, extra)


class L1MaxMethod(Method):
    """L1-Max (arXiv 2503.04697, Eq. 2): R = ĉ·clip(α·(n_gold − l) + δ, 0, 1) for prompts asking for at most
    n_gold tokens, Eq. 1 for exact ones (the paper's dual objective)."""

    STATS_KEYS = L1_STATS

    def __init__(self, config: L1MaxConfig, exact: L1ExactConfig):
        super().__init__(config)
        self.exact = exact

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "L1MaxMethod":
        return cls(cfg.l1_max, cfg.l1_exact)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        n_gold = targets(b, self.name)
        if b.l1_max is None:
            raise ValueError(
                "--recipe.method l1-max needs each prompt's mode (l1_max: 'Think for maximum N tokens.' or "
                "'Think for N tokens.'), and this batch has n_gold without it: the labels must carry the mode "
                "(l1_mode, docs/methods.md#equations-l1)"
            )
        ok = b.correct & ~b.truncated
        c = self.config
        r, a, extra = l1(ok, b.lengths, n_gold, b.l1_max, self.exact.alpha, c.alpha, c.delta, b.length_penalty)
        return finish(b, r, a, extra)
