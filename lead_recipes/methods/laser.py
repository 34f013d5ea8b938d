"""Laser, Laser-D and Laser-DE (Liu et al., arXiv 2505.15612; the paper body is unverified, the rules are the authors'
code, hkust-nlp/Laser `length_penalty.py` mode "reward"): Laser's base score s ∈ {1, −0.5, −1} plus a step bonus α
for a correct response within the target length, then GRPO. Laser is stateless; Laser-D/-DE take one target per
difficulty bucket from their controller (LaserTargets), which monitor passes feed (lead_recipes.training.monitor).
See docs/methods.md#equations-laser and docs/methods.md#equations-laser-d-laser-de.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.baseline_config import LaserConfig, LaserDConfig
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize
from lead_recipes.methods.config import RecipeConfig
from lead_recipes.methods.controllers import LASER_BUCKETS, LaserTargets


def base_score(correct: torch.Tensor, answer_boxed: torch.Tensor | None) -> torch.Tensor:
    """s [M, G] of Laser's `hf_math_verifier.compute_score`: +1 correct, −0.5 wrong, −1 when the format fails (no
    `<think>`/`</think>` in prompt + response, or no `\\boxed{}` after `</think>`: RolloutBatch.answer_boxed)."""
    if answer_boxed is None:
        raise ValueError(
            "Laser's methods (laser, laser-d, laser-de) need per-rollout format flags (RolloutBatch.answer_boxed: the "
            'reward function\'s extra_logs["answer_boxed"], or "answer_boxed" in each replayed group)'
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


# Laser-D / Laser-DE (hkust-nlp/Laser `length_penalty.py` L249-548, `ray_trainer.py` L551-693)
MONITOR_N = 8  # rollouts per monitor prompt; the code's n in n_b (its default, equal to G in every script)
BUCKET_N = {"low": 1, "medium": MONITOR_N // 3, "high": MONITOR_N * 2 // 3}  # n_b of `_choose_target_length`


def target_grid(lower: int, upper: int = 16384, step: int = 1024) -> list[int]:
    """The code's `get_length_threshold` grid: [lower, lower + step, …, upper], or [lower, step, 2·step, …] when
    lower < step. ValueError when step ≤ 0 or lower > upper (the grid would be empty and no bucket could get a
    target)."""
    if step <= 0:
        raise ValueError(f"Laser-D target grid: the step must be > 0 tokens, got {step}")
    if lower > upper:
        raise ValueError(
            f"Laser-D target grid: the lower bound {lower} is above the upper bound {upper}; give a lower bound "
            f"≤ {upper} (the authors' runs: 1024, 2048, 4096)"
        )
    if lower < step:
        return [lower] + list(range(step, upper + 1, step))
    return list(range(lower, upper + 1, step))


def monitor_targets(correct: torch.Tensor, lengths: torch.Tensor, grid: list[int], k: int = 1) -> dict:
    """L*_b per monitor band from one monitor pass (correct, lengths [P, n]): a prompt's band is low if acc ≤ 1/3,
    medium if ≤ 2/3, else high (inclusive, unlike the training buckets); coverage_b(L) = the share of ALL the band's
    rollouts no longer than L; L*_b = the least grid L with ⌊coverage_b(L)·n_b⌋ ≥ k, None when there is none."""
    acc = correct.double().mean(1)
    band = torch.where(acc <= 1 / 3, 0, torch.where(acc <= 2 / 3, 1, 2))
    targets = {}
    for i, name in enumerate(LASER_BUCKETS):
        rows = lengths[band == i].reshape(-1).double()
        found = None
        for limit in grid:
            coverage = float((rows <= limit).double().mean()) if rows.numel() else 0.0
            if int(coverage * BUCKET_N[name]) >= k:
                found = limit
                break
        targets[name] = found
    return targets


def bucket_targets(s: torch.Tensor, targets: dict) -> torch.Tensor:
    """L_T [M, 1] of each training group from its bucket (accuracy a_q = #{s = 1}/G: high if ≥ 2/3, medium if
    ≥ 1/3, else low); a bucket with no target gets ∞ (the code's batch-maximum clamp never changes a reward)."""
    a = (s == 1.0).double().mean(1, keepdim=True)
    value = {b: float("inf") if targets[b] is None else float(targets[b]) for b in LASER_BUCKETS}
    return torch.where(a >= 2 / 3, value["high"], torch.where(a >= 1 / 3, value["medium"], value["low"]))


def laser_d_reward(
    s: torch.Tensor,
    lengths: torch.Tensor,
    targets: dict,
    alpha: float,
    explore: bool = False,
    repetitive: torch.Tensor | None = None,
) -> torch.Tensor:
    """R [M, G]: s + α·1[s = 1 ∧ l ≤ L_T(bucket)] (Laser-D); with `explore` (Laser-DE) also + α for a wrong,
    well-formatted response (s = −0.5) longer than L_T, unless `repetitive` flags it (None: the released code's
    inert guard, every such response)."""
    limit = bucket_targets(s, targets)
    r = s + alpha * ((s == 1.0) & (lengths <= limit)).double()
    if explore:
        long_wrong = (s == -0.5) & (lengths > limit)
        if repetitive is not None:
            long_wrong = long_wrong & ~repetitive
        r = r + alpha * long_wrong.double()
    return r


def laser_d(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    answer_boxed: torch.Tensor | None,
    targets: dict,
    alpha: float,
    length_penalty=0.0,
    explore: bool = False,
    repetitive: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """Laser-D: R = s + α·1[s = 1 ∧ l ≤ L_T(bucket)] (+ the length penalty), A = GroupNorm(R); `explore` (Laser-DE)
    adds α to a wrong, well-formatted response longer than L_T unless `repetitive` flags it. The statistics log each
    bucket's target as the code prints it, min(L*_b, the batch's longest response). Returns (R, A, statistics)."""
    s = base_score(correct, answer_boxed)
    r = laser_d_reward(s, lengths, targets, alpha, explore, repetitive) + length_penalty
    limit = bucket_targets(s, targets)
    longest = float(lengths.max())
    stats = {
        "format_ok_frac": float((s > -1).double().mean()),
        "bonus_frac": float(((s == 1.0) & (lengths <= limit)).double().mean()),
        **{f"target_{b}": min(longest, float("inf") if targets[b] is None else targets[b]) for b in LASER_BUCKETS},
    }
    if explore:
        explored = (s == -0.5) & (lengths > limit)
        explored = explored if repetitive is None else explored & ~repetitive
        stats["explore_frac"] = float(explored.double().mean())
    return r, group_normalize(r), stats


def laser_de(
    correct: torch.Tensor,
    lengths: torch.Tensor,
    answer_boxed: torch.Tensor | None,
    targets: dict,
    alpha: float,
    length_penalty=0.0,
    repetitive: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """Laser-DE: Laser-D plus the exploration bonus (see `laser_d`); `repetitive` None = the released code's inert
    guard."""
    return laser_d(correct, lengths, answer_boxed, targets, alpha, length_penalty, True, repetitive)


class LaserDMethod(Method):
    """Laser-D (arXiv 2505.15612; hkust-nlp/Laser): R = s + α·1[s = 1 ∧ l ≤ L_T(bucket)], the bucket by the group's
    accuracy, the targets chosen by the last monitor pass; A = GroupNorm(R)."""

    STATS_KEYS = BASE_STATS + ("format_ok_frac", "bonus_frac", "target_low", "target_medium", "target_high")

    def __init__(self, config: LaserDConfig):
        super().__init__(config)
        self.grid = target_grid(config.grid_lower, config.grid_upper, config.grid_step)
        self.controller = LaserTargets()

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "LaserDMethod":
        return cls(cfg.laser_d)

    def observe_monitor(self, correct: torch.Tensor, lengths: torch.Tensor, step: int | None = None) -> dict:
        """One monitor pass (correct, lengths [P prompts, n samples]; correct = the answer only), run after the
        update of step `step` (default: the batches shaped so far), replaces the targets from the next batch on;
        returns them."""
        if not (isinstance(correct, torch.Tensor) and correct.dim() == 2 and correct.numel()):
            raise ValueError(f"a monitor pass needs correct as a non-empty [P, n] tensor, got {correct!r:.60}")
        if not isinstance(lengths, torch.Tensor) or lengths.shape != correct.shape:
            raise ValueError(f"monitor lengths {tuple(getattr(lengths, 'shape', ()))} differ from correct's shape")
        targets = monitor_targets(correct.bool(), lengths.double(), self.grid)
        self.controller.observe(targets, self.controller.step if step is None else step)
        return targets

    def _targets(self) -> dict:
        if self.controller.targets is None:
            raise ValueError(
                f"{self.name} has no bucket targets: no monitor pass has run (training: the eval dataset's pass "
                "before step 1; replay: a step's 'monitor' or 'controller'). The authors' code falls back to 8192 "
                "tokens here, a value its runs never use; this package refuses it"
            )
        return self.controller.targets

    def _step(self, b: RolloutBatch) -> MethodOutput:
        r, a, extra = laser_d(
            b.correct, b.lengths, b.answer_boxed, self._targets(), self.config.alpha, b.length_penalty
        )
        self.controller.step += 1
        return finish(b, r, a, extra)


class LaserDeMethod(LaserDMethod):
    """Laser-DE (arXiv 2505.15612; hkust-nlp/Laser): Laser-D plus α for a wrong, well-formatted response longer than
    its bucket's target (unless Laser's repetition detector flags it, with the guard on)."""

    STATS_KEYS = LaserDMethod.STATS_KEYS + ("explore_frac",)

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "LaserDeMethod":
        return cls(cfg.laser_de)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        repetitive = None  # the released code's guard never fires (docs/methods.md#equations-laser-d-laser-de)
        if self.config.repetition_guard_enable:
            if b.repetitive is None:
                raise ValueError(
                    "--recipe.laser_de.repetition_guard_enable needs per-rollout repetition flags (RolloutBatch."
                    'repetitive: the plug-in runs Laser\'s token detector, a replayed group needs "repetitive"); '
                    "turn the guard off for the released code's behaviour"
                )
            repetitive = b.repetitive
        targets = self._targets()
        r, a, extra = laser_de(
            b.correct, b.lengths, b.answer_boxed, targets, self.config.alpha, b.length_penalty, repetitive
        )
        self.controller.step += 1
        return finish(b, r, a, extra)
