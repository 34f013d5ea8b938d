"""Shared building blocks of every method: batch validation, GRPO group normalisation (arXiv 2402.03300),
BatchWhiten (verl masked_whiten, token-weighted or per sequence) and the statistics every method logs.

All arithmetic runs in float64 (outputs are cast to float32 by the caller) so that a resumed controller sees the
same numbers bit for bit. Nothing here knows about a particular method; nothing here does I/O.
"""
from __future__ import annotations

import math

import torch

from lead_recipes.methods import MethodOutput, RolloutBatch

GROUP_EPS = 1e-6      # our choice (verl's value): ε of group normalisation for every method
WHITEN_EPS = 1e-8     # verl masked_whiten, inside rsqrt


def _first_bad_row(bad: torch.Tensor) -> int:
    return int(bad.reshape(bad.shape[0], -1).any(1).nonzero()[0, 0])


def as_float(mask: torch.Tensor) -> torch.Tensor:
    """A bool mask as float64 0/1 (through a uint8 view: the same values at half the cost of bool → float64;
    .double() parses its arguments faster than .to(dtype))."""
    return (mask.view(torch.uint8) if mask.dtype == torch.bool else mask).double()


def row_sums01(x: torch.Tensor) -> torch.Tensor:
    """Row sums [M] of a float64 [M, G] tensor, exact when the entries are 0/1 counts (any summation order gives
    the same integers) and zero exactly when a row of non-negative entries is all zero: a matrix-vector product,
    ~2.5× faster than .sum(1) on short rows. Not for general floats (the order of the additions differs)."""
    return torch.mv(x, x.new_ones(x.shape[1]))


def _as_bool(name: str, x, shape) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected [M, G] = {tuple(shape)} like `correct`")
    if x.dtype == torch.bool:
        return x
    bad = ~((x == 0) | (x == 1))
    if bad.any():
        q = _first_bad_row(bad)
        raise ValueError(f"prompt {q}: {name} must be boolean (0/1), got {x[q].tolist()}")
    return x != 0


def check_batch(batch: RolloutBatch) -> RolloutBatch:
    """Validate a batch and return a normalised copy: bool flags, float64 lengths, `truncated` derived from
    `lengths >= max_new_tokens` when not given. ValueError names the offending prompt index."""
    if not isinstance(batch, RolloutBatch):
        raise ValueError(f"expected a RolloutBatch, got {type(batch).__name__}")
    c = batch.correct
    if not isinstance(c, torch.Tensor) or c.dim() != 2:
        raise ValueError(f"correct must be a 2-D [M prompts, G rollouts] tensor, got "
                         f"{tuple(c.shape) if isinstance(c, torch.Tensor) else type(c).__name__}")
    m, g = c.shape
    if m == 0:
        raise ValueError("the batch has no prompts (M = 0)")
    if g == 0:
        raise ValueError("prompt 0: empty group (G = 0 rollouts)")
    if g == 1:
        raise ValueError("prompt 0: group of 1 rollout; group-relative advantages need G ≥ 2 per prompt")
    mnt = batch.max_new_tokens
    if isinstance(mnt, bool) or not isinstance(mnt, int) or mnt <= 0:
        raise ValueError(f"max_new_tokens must be a positive int, got {mnt!r}")
    correct = _as_bool("correct", c, (m, g))
    lens = batch.lengths
    if not isinstance(lens, torch.Tensor) or tuple(lens.shape) != (m, g):
        raise ValueError(f"lengths has shape {tuple(getattr(lens, 'shape', ()))}, expected [M, G] = {(m, g)}")
    lens = lens.double()
    lo_t, hi_t = torch.aminmax(lens)
    lo, hi = float(lo_t), float(hi_t)
    if not (lo > 0 and hi <= mnt):   # NaN fails both comparisons; diagnose only on failure
        for bad, what in ((~torch.isfinite(lens), "must be finite"), (lens <= 0, "must be > 0 tokens (EOS included)"),
                          (lens > mnt, f"exceed max_new_tokens = {mnt}")):
            if bad.any():
                q = _first_bad_row(bad)
                raise ValueError(f"prompt {q}: lengths {what}: {lens[q].tolist()}")
    if batch.truncated is not None:
        trunc = _as_bool("truncated", batch.truncated, (m, g))
    elif hi < mnt:   # lengths ≤ max_new_tokens holds here, so nothing reaches the cap: skip the comparison
        trunc = torch.zeros((m, g), dtype=torch.bool)
    else:            # hi == max_new_tokens: comparing with the 0-dim tensor is the same test, ~2× faster
        trunc = lens >= hi_t
    rep = None if batch.repetitive is None else _as_bool("repetitive", batch.repetitive, (m, g))
    return RolloutBatch(correct=correct, lengths=lens, max_new_tokens=mnt, truncated=trunc, repetitive=rep)


def check_output(out: MethodOutput, keys: tuple[str, ...]) -> None:
    """NaN/inf never leaves a method: raise naming the prompt (a bug guard; valid input cannot trigger it)."""
    for name in ("rewards", "advantages"):
        t = getattr(out, name)
        # any NaN/inf makes the (float32) sum non-finite; a sum that merely overflowed finds no bad element below
        if not math.isfinite(float(t.sum())):
            bad = ~torch.isfinite(t)
            if bad.any():
                q = _first_bad_row(bad)
                raise ValueError(f"prompt {q}: non-finite {name} {t[q].tolist()}")
    if tuple(out.stats) != keys:
        raise ValueError(f"stats keys {tuple(out.stats)} differ from the method's fixed set {keys}")
    bad = [k for k, v in out.stats.items() if not (isinstance(v, float) and math.isfinite(v))]
    if bad:
        raise ValueError(f"non-finite or non-float statistics: {bad}")


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
