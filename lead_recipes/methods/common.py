"""Shared building blocks of every method: GRPO group normalisation (arXiv 2402.03300), BatchWhiten (verl
masked_whiten, token-weighted or per sequence) and the statistics every method logs. float64 arithmetic (a resumed
controller sees the same bits); nothing method-specific, no I/O. See docs/methods.md.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import MethodOutput, RolloutBatch

GROUP_EPS = 1e-6  # our choice (verl's value): ε of group normalisation for every method
WHITEN_EPS = 1e-8  # verl masked_whiten, inside rsqrt


def group_normalize(r: torch.Tensor, eps: float = GROUP_EPS) -> torch.Tensor:
    """A = (r − mean_g r) / (std_g r + ε) per row, unbiased std over the G samples. The rewards are first shifted
    by the row's first value (the same A in exact arithmetic) so that a row whose rewards are all equal has mean and
    std exactly 0 and gets A = 0 exactly, not a rounding residue of its mean divided by ε."""
    r = r - r[..., :1]
    return (r - r.mean(-1, keepdim=True)) / (r.std(-1, correction=1, keepdim=True) + eps)


def whiten(a: torch.Tensor, lengths: torch.Tensor, mode: str = "token") -> tuple[torch.Tensor, float, float]:
    """BatchWhiten: (a − μ̄)·rsqrt(σ̄² + 1e-8) over the whole batch, σ̄² unbiased. mode "token": every rollout's
    scalar advantage counts once per response token (verl masked_whiten on the broadcast advantage); "sequence":
    once per rollout. Returns (whitened, μ̄, σ̄)."""
    w = lengths if mode == "token" else torch.ones_like(a)
    n = float(w.sum())
    if n <= 1:
        raise ValueError(f"BatchWhiten needs more than 1 {mode} in the batch, got {n}")
    mean = (w * a).sum() / n
    var = (w * (a - mean).square()).sum() / (n - 1)
    return (a - mean) * torch.rsqrt(var + WHITEN_EPS), float(mean), float(var.sqrt())


BASE_STATS = (
    "accuracy",
    "mean_length",
    "truncated_frac",
    "reward_mean",
    "reward_std",
    "advantage_mean",
    "advantage_abs_mean",
    "zero_advantage_groups",
)


def base_stats(b: RolloutBatch, rewards: torch.Tensor, adv: torch.Tensor) -> dict[str, float]:
    """The statistics every method logs (first, in this order); reward_std is unbiased over all M·G rollouts."""
    return {
        "accuracy": float(b.correct.double().mean()),
        "mean_length": float(b.lengths.mean()),
        "truncated_frac": float(b.truncated.double().mean()),
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std(correction=1)),
        "advantage_mean": float(adv.mean()),
        "advantage_abs_mean": float(adv.abs().mean()),
        "zero_advantage_groups": float((adv == 0).all(1).double().mean()),
    }


def finish(b: RolloutBatch, rewards: torch.Tensor, adv: torch.Tensor, extra: dict[str, float]) -> MethodOutput:
    """The method's output: float32 rewards and advantages, the base statistics, then the method's own."""
    stats = base_stats(b, rewards, adv)
    stats.update({k: float(v) for k, v in extra.items()})
    return MethodOutput(rewards=rewards.float(), advantages=adv.float(), stats=stats)
