"""Shared building blocks of every method: GRPO group normalisation (arXiv 2402.03300),
BatchWhiten (verl masked_whiten, token-weighted or per sequence) and the statistics every method logs.

All arithmetic runs in float64 (outputs are cast to float32 by the caller) so that a resumed controller sees the
same numbers bit for bit. Nothing here knows about a particular method; nothing here does I/O.
"""
from __future__ import annotations

import math

import torch

from lead_recipes.methods.base import MethodOutput, RolloutBatch

GROUP_EPS = 1e-6      # our choice (verl's value): ε of group normalisation for every method
WHITEN_EPS = 1e-8     # verl masked_whiten, inside rsqrt


def as_float(mask: torch.Tensor) -> torch.Tensor:
    """A bool mask as float64 0/1 (through a uint8 view: the same values at half the cost of bool → float64;
    .double() parses its arguments faster than .to(dtype))."""
    return (mask.view(torch.uint8) if mask.dtype == torch.bool else mask).double()


def row_sums01(x: torch.Tensor) -> torch.Tensor:
    """Row sums [M] of a float64 [M, G] tensor, exact when the entries are 0/1 counts (any summation order gives
    the same integers) and zero exactly when a row of non-negative entries is all zero: a matrix-vector product,
    ~2.5× faster than .sum(1) on short rows. Not for general floats (the order of the additions differs)."""
    return torch.mv(x, x.new_ones(x.shape[1]))


def group_normalize(r: torch.Tensor, eps: float = GROUP_EPS) -> torch.Tensor:
    """A = (r − mean_g r) / (std_g r + ε) per row (unbiased std over all G). Rewards are shifted by the row's first
    value before averaging, so a row whose rewards are all equal gets exactly 0 with no float residue of the
    mean, and no extra mask. The std is spelled out: torch.std over a short inner dimension is ~30× slower than
    these ops (bench_methods.py)."""
    g = float(r.shape[-1])   # a float scalar: the same division as by the int, without the int→float promotion
    d = r - r[..., :1]       # then updated in place: the same operations with fewer temporaries
    d -= d.sum(-1, keepdim=True).div_(g)
    std = (d * d).sum(-1, keepdim=True).div_(g - 1).sqrt_()
    return d.div_(std.add_(eps))


def whiten(a: torch.Tensor, lengths: torch.Tensor, mode: str = "token",
           length_sum: float | None = None) -> tuple[torch.Tensor, float, float]:
    """BatchWhiten: (a − μ̄)·rsqrt(σ̄² + 1e-8) over the whole batch. mode "token": every rollout's scalar advantage
    counts once per response token (verl masked_whiten on the broadcast advantage, unbiased over tokens);
    "sequence": once per rollout. Returns (whitened, μ̄, σ̄). `length_sum` = float(lengths.sum()) if known.
    The scalars are Python floats (IEEE double, the same roundings as 0-dim float64 tensors, fewer ops)."""
    if mode == "token":
        n = float(lengths.sum()) if length_sum is None else length_sum
    else:   # weight 1 per rollout: w·a = a exactly, so the weights are left out
        n = float(a.numel())
    if n <= 1:
        raise ValueError(f"BatchWhiten needs more than 1 {mode} in the batch, got {n}")
    mean = float((lengths * a if mode == "token" else a).sum()) / n
    d = a - mean
    sq = d.square()
    var = float((sq.mul_(lengths) if mode == "token" else sq).sum()) / (n - 1)
    return d.mul_(1.0 / math.sqrt(var + WHITEN_EPS)), mean, math.sqrt(var)


BASE_STATS = ("accuracy", "mean_length", "truncated_frac", "reward_mean", "reward_std", "advantage_mean",
              "advantage_abs_mean", "zero_advantage_groups")


def base_stats(b: RolloutBatch, rewards: torch.Tensor, adv: torch.Tensor, n_correct: float | None = None,
               length_sum: float | None = None) -> dict[str, float]:
    """The statistics every method logs (first, in this order). `n_correct` (number of correct rollouts) and
    `length_sum` (float(b.lengths.sum())) may be passed when the method already has them."""
    n = rewards.numel()
    if n_correct is None:
        n_correct = float(b.correct.count_nonzero())
    if length_sum is None:
        length_sum = float(b.lengths.sum())
    r_mean = float(rewards.sum()) / n
    r_var = float((rewards - r_mean).square_().sum()) / max(n - 1, 1)
    abs_adv = adv.abs()
    m = adv.shape[0]
    return {"accuracy": n_correct / n, "mean_length": length_sum / n,
            "truncated_frac": float(b.truncated.count_nonzero()) / n, "reward_mean": r_mean,
            "reward_std": math.sqrt(r_var), "advantage_mean": float(adv.sum()) / n,
            "advantage_abs_mean": float(abs_adv.sum()) / n,
            "zero_advantage_groups": (m - int(row_sums01(abs_adv).count_nonzero())) / m}


def finish(b: RolloutBatch, rewards: torch.Tensor, adv: torch.Tensor, extra: dict[str, float],
           n_correct: float | None = None, length_sum: float | None = None) -> MethodOutput:
    stats = base_stats(b, rewards, adv, n_correct, length_sum)
    stats.update({k: float(v) for k, v in extra.items()})
    return MethodOutput(rewards=rewards.float(), advantages=adv.float(), stats=stats)
