"""Shared building blocks of every method: batch validation, GRPO group normalisation (§0.1), BatchWhiten (§0.2,
token-weighted or per sequence) and the statistics every method logs.

All arithmetic runs in float64 (outputs are cast to float32 by the caller) so that a resumed controller sees the
same numbers bit for bit. Nothing here knows about a particular method; nothing here does I/O.
"""
from __future__ import annotations

import math

import torch

from lead_recipes.methods import MethodOutput, RolloutBatch

GROUP_EPS = 1e-6      # §8: ε of group normalisation for every method
WHITEN_EPS = 1e-8     # §0.2: verl masked_whiten, inside rsqrt


def _first_bad_row(bad: torch.Tensor) -> int:
    return int(bad.reshape(bad.shape[0], -1).any(1).nonzero()[0, 0])


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
    lens = lens.to(torch.float64)
    lo, hi = torch.aminmax(lens)
    if not (float(lo) > 0 and float(hi) <= mnt):   # NaN fails both comparisons; diagnose only on failure
        for bad, what in ((~torch.isfinite(lens), "must be finite"), (lens <= 0, "must be > 0 tokens (EOS included)"),
                          (lens > mnt, f"exceed max_new_tokens = {mnt}")):
            if bad.any():
                q = _first_bad_row(bad)
                raise ValueError(f"prompt {q}: lengths {what}: {lens[q].tolist()}")
    trunc = (lens >= mnt) if batch.truncated is None else _as_bool("truncated", batch.truncated, (m, g))
    rep = None if batch.repetitive is None else _as_bool("repetitive", batch.repetitive, (m, g))
    return RolloutBatch(correct=correct, lengths=lens, max_new_tokens=mnt, truncated=trunc, repetitive=rep)


def check_output(out: MethodOutput, keys: tuple[str, ...]) -> None:
    """NaN/inf never leaves a method: raise naming the prompt (a bug guard; valid input cannot trigger it)."""
    for name in ("rewards", "advantages"):
        t = getattr(out, name)
        if not math.isfinite(float(t.sum(dtype=torch.float64))):   # any NaN/inf makes the sum non-finite
            bad = ~torch.isfinite(t)
            q = _first_bad_row(bad) if bad.any() else 0
            raise ValueError(f"prompt {q}: non-finite {name} {t[q].tolist()}")
    if tuple(out.stats) != keys:
        raise ValueError(f"stats keys {tuple(out.stats)} differ from the method's fixed set {keys}")
    bad = [k for k, v in out.stats.items() if not (isinstance(v, float) and math.isfinite(v))]
    if bad:
        raise ValueError(f"non-finite or non-float statistics: {bad}")


def group_normalize(r: torch.Tensor, eps: float = GROUP_EPS) -> torch.Tensor:
    """A = (r − mean_g r) / (std_g r + ε) per row (unbiased std over all G). Rewards are shifted by the row's first
    value before averaging, so a row whose rewards are all equal gets exactly 0 (§8) with no float residue of the
    mean, and no extra mask. The std is spelled out: torch.std over a short inner dimension is ~30× slower than
    these ops (bench_methods.py)."""
    g = r.shape[-1]
    shifted = r - r[..., :1]
    d = shifted - shifted.sum(-1, keepdim=True) / g
    std = ((d * d).sum(-1, keepdim=True) / (g - 1)).sqrt()
    return d / (std + eps)


def whiten(a: torch.Tensor, lengths: torch.Tensor, mode: str = "token") -> tuple[torch.Tensor, float, float]:
    """BatchWhiten: (a − μ̄)·rsqrt(σ̄² + 1e-8) over the whole batch. mode "token": every rollout's scalar advantage
    counts once per response token (verl masked_whiten on the broadcast advantage, unbiased over tokens);
    "sequence": once per rollout. Returns (whitened, μ̄, σ̄)."""
    w = lengths if mode == "token" else torch.ones_like(a)
    n = w.sum()
    if float(n) <= 1:
        raise ValueError(f"BatchWhiten needs more than 1 {mode} in the batch, got {float(n)}")
    mean = (w * a).sum() / n
    var = (w * (a - mean).square()).sum() / (n - 1)
    stats = torch.stack([mean, var]).tolist()
    return (a - mean) * torch.rsqrt(var + WHITEN_EPS), stats[0], math.sqrt(stats[1])


BASE_STATS = ("accuracy", "mean_length", "truncated_frac", "reward_mean", "reward_std", "advantage_mean",
              "advantage_abs_mean", "zero_advantage_groups")


def base_stats(b: RolloutBatch, rewards: torch.Tensor, adv: torch.Tensor) -> dict[str, float]:
    """The statistics every method logs (first, in this order); one stacked reduction, one conversion."""
    n = rewards.numel()
    r_mean = rewards.sum() / n
    sums = torch.stack([b.correct.sum(), b.lengths.sum(), b.truncated.sum(), r_mean,
                        (rewards - r_mean).square().sum() / max(n - 1, 1), adv.sum(), adv.abs().sum(),
                        (adv.abs().sum(1) == 0).sum()]).to(torch.float64).tolist()
    m = adv.shape[0]
    return {"accuracy": sums[0] / n, "mean_length": sums[1] / n, "truncated_frac": sums[2] / n,
            "reward_mean": sums[3], "reward_std": math.sqrt(sums[4]), "advantage_mean": sums[5] / n,
            "advantage_abs_mean": sums[6] / n, "zero_advantage_groups": sums[7] / m}


def finish(b: RolloutBatch, rewards: torch.Tensor, adv: torch.Tensor, extra: dict[str, float]) -> MethodOutput:
    stats = base_stats(b, rewards, adv)
    stats.update({k: float(v) for k, v in extra.items()})
    return MethodOutput(rewards=rewards.to(torch.float32), advantages=adv.to(torch.float32), stats=stats)
