"""Stop training when grading itself fails (every sample `error`/`timeout`, reward 0: a quiet run that learns
nothing): `GradingGuard` raises GradingFailure after `--recipe.guard.grade_failure_steps` windows whose failure share
is above `--recipe.guard.grade_failure_max`, or at the end of the data after fewer failing windows (`finish`);
`status_counts`, `SampleWindows` and `grading_failure` feed and find it.
It does not change rewards or skip steps (grading_gate does); its streak is not checkpointed.
See docs/training.md#when-grading-fails-the-run-stops.
"""

from __future__ import annotations

from lead_recipes.methods.config import GuardConfig, validate_section

STATUSES = ("correct", "wrong", "no_answer", "timeout", "error")
FAILED = ("error", "timeout")
SHARE_KEY = "recipe/grading/failure_share"
SKIPPED_KEY = "recipe/grading/step_skipped"  # 1.0 in the logs of a step skipped for failed grading


def _count_key(status: str) -> str:
    return f"recipe/grading/{status}_count"


class GradingFailure(RuntimeError):
    """Grading failed for most samples for several steps in a row; the message says what to check."""


class GradingGuard:
    def __init__(self, grade_failure_max: float = 0.5, grade_failure_steps: int = 3):
        validate_section("guard", GuardConfig(float(grade_failure_max), grade_failure_steps))
        self.max_share, self.steps = float(grade_failure_max), grade_failure_steps
        self.streak, self.last = 0, dict.fromkeys(STATUSES, 0.0)

    @classmethod
    def from_recipe(cls, recipe) -> "GradingGuard":
        cfg = getattr(recipe, "guard", None) or GuardConfig()
        return cls(cfg.grade_failure_max, cfg.grade_failure_steps)

    def observe(self, stats: dict) -> dict[str, float]:
        """`observe_counts` on a step's `recipe/grading/<status>_count` statistics; {} when it has none."""
        if not logged_share(stats):
            return {}
        return {SHARE_KEY: self.observe_counts({s: float(stats[_count_key(s)]) for s in STATUSES})}

    def observe_counts(self, counts: dict[str, float]) -> float | None:
        """The step's failure share (None for no samples); raises GradingFailure on the K-th bad step in a row."""
        share = failure_share(counts)
        if share is None:
            return None
        self.streak, self.last = (self.streak + 1 if share > self.max_share else 0), counts
        if self.streak >= self.steps:
            raise self._failure(f"for {self.streak} consecutive steps: training stopped")
        return share

    def finish(self) -> None:
        """At the end of the data: GradingFailure when the last steps failed, a streak shorter than K (the run
        would otherwise end with exit 0 and those steps untrained)."""
        if self.streak:
            raise self._failure(f"in the last {self.streak} window(s) when the data ran out: they were not trained")

    def _failure(self, when: str) -> GradingFailure:
        counts = self.last
        return GradingFailure(
            f"grading failed for {failure_share(counts):.0%} of the samples ({counts['error']:.0f} error, "
            f"{counts['timeout']:.0f} timeout of {sum(counts.values()):.0f}), above --recipe.guard.grade_failure_max "
            f"{self.max_share} {when}.\nCheck the reward server's log and GET /stats, LEAD_RECIPES_GRADE_TIMEOUT_S "
            "and --data.label_key, then resume from the last checkpoint."
        )


def logged_share(stats: dict) -> dict[str, float]:
    """`{SHARE_KEY: share}` from a step's `recipe/grading/<status>_count` statistics ({} without them): no streak."""
    if stats.get("recipe/grading/status_missing", 0.0) or not all(_count_key(s) in stats for s in STATUSES):
        return {}
    share = failure_share({s: float(stats[_count_key(s)]) for s in STATUSES})
    return {} if share is None else {SHARE_KEY: share}


def failure_share(counts: dict[str, float]) -> float | None:
    """(error + timeout) / all samples of per-status counts; None when there are none."""
    total = sum(float(counts.get(s, 0.0)) for s in STATUSES)
    return None if total <= 0 else sum(float(counts.get(s, 0.0)) for s in FAILED) / total


def status_counts(infos) -> dict[str, float] | None:
    """Per-status sample counts summed over experience `info` dicts (`status_<status>` tensors or numbers, one per
    sample); None when any info lacks one (the reward function is not lead-recipes')."""
    counts = dict.fromkeys(STATUSES, 0.0)
    for info in infos:
        for s in STATUSES:
            value = info.get(f"status_{s}")
            if value is None:
                return None
            counts[s] += float(value.sum()) if hasattr(value, "sum") else float(value)
    return counts


class SampleWindows:
    """Feeds `guard` one step's worth (`window` samples) of graded samples at a time, as they are graded. Samples
    without a grading status are not counted."""

    def __init__(self, guard: GradingGuard, window: int):
        self.guard, self.window = guard, max(int(window), 1)
        self.counts, self.samples = dict.fromkeys(STATUSES, 0.0), 0

    def add(self, info: dict) -> None:
        counts = status_counts([info])
        if counts is None:
            return
        for s in STATUSES:
            self.counts[s] += counts[s]
        self.samples += 1
        if self.samples >= self.window:
            self._flush()

    def finish(self) -> None:
        """The data ran out: the last, partial window counts too; then `GradingGuard.finish`."""
        if self.samples:
            self._flush()
        self.guard.finish()

    def _flush(self) -> None:
        full, self.counts, self.samples = self.counts, dict.fromkeys(STATUSES, 0.0), 0
        self.guard.observe_counts(full)


def grading_failure(exc: BaseException) -> GradingFailure | None:
    """The GradingFailure behind `exc`: itself, or the cause of a RayTaskError from ray.get."""
    for _ in range(8):  # the original exception, not Ray's subclass of it (its text repeats the traceback)
        cause = getattr(exc, "cause", None) or exc.__cause__
        if cause is None:
            return exc if isinstance(exc, GradingFailure) else None
        exc = cause
    return None
