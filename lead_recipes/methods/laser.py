"""Laser (Liu et al., arXiv 2505.15612; the paper body is unverified, the rule is the authors' code, hkust-nlp/Laser
`length_penalty.py` mode "reward"): Laser's base score s ∈ {1, −0.5, −1} plus a step bonus α for a correct response
within the target length, then GRPO. Stateless. See docs/methods.md#equations-laser.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.baseline_config import LaserConfig
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import RecipeConfig


def base_score(correct: torch.Tensor, answer_boxed: torch.Tensor | None) -> torch.Tensor:
    """s [M, G] of Laser's `hf_math_verifier.compute_score`: +1 correct, −0.5 wrong, −1 when the format fails (no
    `<think>`/`</think>` in prompt + response, or no `\\boxed{}` after `</think>`: RolloutBatch.answer_boxed)."""
    if answer_boxed is None:
        raise ValueError(
            "--recipe.method laser needs per-rollout format flags (RolloutBatch.answer_boxed: the reward function's "
            'extra_logs["answer_boxed"], or "answer_boxed" in each replayed group)'
        )
    return torch.where(answer_boxed, torch.where(correct, 1.0, -0.5), -1.0).double()


def laser(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    answer_boxed: torch.Tensor | None,
    cfg: LaserConfig,
    length_penalty=0.0,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """R = s + α·1[s = 1 ∧ l ≤ L_T] (+ the length penalty), A = GroupNorm(R). Returns (R, A, statistics)."""
    s = base_score(correct, answer_boxed)
    bonus = (s == 1.0) & (lengths <= cfg.target_length)
    r = s + cfg.alpha * bonus.double() + length_penalty
    return (
        r,
        group_normalize(r),
        {"format_ok_frac": float((s > -1).double().mean()), "bonus_frac": float(bonus.double().mean())},
    )


class LaserMethod(Method):
    """Laser (arXiv 2505.15612; hkust-nlp/Laser): R = s + α·1[s = 1 ∧ l ≤ L_T], s = +1 correct, −0.5 wrong, −1
    format failure; A = GroupNorm(R)."""

    STATS_KEYS = BASE_STATS + ("format_ok_frac", "bonus_frac")

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "LaserMethod":
        return cls(cfg.laser)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        r, a, extra = laser(b.correct, b.lengths, b.answer_boxed, self.config, b.length_penalty)
        return finish(b, r, a, extra)
