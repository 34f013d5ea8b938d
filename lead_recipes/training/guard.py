"""Stop training when grading itself fails, instead of training on rewards of 0 that say nothing about the answers.

Why: a grader that fails (worker pool broken, timeouts too tight for the machine, a reward server down) grades every
sample `error` or `timeout`, i.e. reward 0 with correctness 0. Nothing crashes: GRPO sees all-equal groups and
learns nothing, and LEAD keeps optimising its length channel on pure noise. Both look like a quiet run.

What it does:
- The `--recipe.guard.*` flags are a section of the recipe like any other (GuardConfig in
  lead_recipes.methods.config): `grade_failure_max` (default 0.5) and `grade_failure_steps` (default 3).
- `GradingGuard.observe(stats)` reads one step's `recipe/grading/<status>_count` statistics (lead_recipes.training.step_stats)
  and returns `{"recipe/grading/failure_share": (error + timeout) / all}` for the step's logs; when that share has
  been above `grade_failure_max` for `grade_failure_steps` consecutive steps it raises GradingFailure, whose message
  says what failed and what to check. `observe_trainer(trainer, status)` keeps one guard per trainer (the plug-in's
  train_step calls it after each step).
- `grading_failure(exc)` finds a GradingFailure behind a Ray error, for the driver's one-line message.

What it does not do: change rewards, retry grading, or judge steps whose reward function reports no grading status
(not lead-recipes' reward function): those are skipped. Its streak is not checkpointed (a resume starts at 0).
"""
from __future__ import annotations

from lead_recipes.methods.config import GuardConfig, validate_section

STATUSES = ("correct", "wrong", "no_answer", "timeout", "error")
FAILED = ("error", "timeout")
SHARE_KEY = "recipe/grading/failure_share"


def _count_key(status: str) -> str:
    return f"recipe/grading/{status}_count"


class GradingFailure(RuntimeError):
    """Grading failed for most samples for several steps in a row; the message says what to check."""


class GradingGuard:
    def __init__(self, grade_failure_max: float = 0.5, grade_failure_steps: int = 3):
        validate_section("guard", GuardConfig(float(grade_failure_max), grade_failure_steps))
        self.max_share, self.steps = float(grade_failure_max), grade_failure_steps
        self.streak = 0

    @classmethod
    def from_recipe(cls, recipe) -> "GradingGuard":
        cfg = getattr(recipe, "guard", None) or GuardConfig()
        return cls(cfg.grade_failure_max, cfg.grade_failure_steps)

    def observe(self, stats: dict) -> dict[str, float]:
        """The step's failure share for the logs; raises GradingFailure on the K-th bad step in a row."""
        if stats.get("recipe/grading/status_missing", 0.0) or not all(_count_key(s) in stats for s in STATUSES):
            return {}
        counts = {s: float(stats[_count_key(s)]) for s in STATUSES}
        total = sum(counts.values())
        if total <= 0:
            return {}
        failed = sum(counts[s] for s in FAILED)
        share = failed / total
        self.streak = self.streak + 1 if share > self.max_share else 0
        if self.streak >= self.steps:
            raise GradingFailure(
                f"grading failed for {share:.0%} of the samples ({counts['error']:.0f} error, {counts['timeout']:.0f} "
                f"timeout of {total:.0f}), above --recipe.guard.grade_failure_max {self.max_share} for "
                f"{self.streak} consecutive steps (--recipe.guard.grade_failure_steps {self.steps}); their reward 0 "
                "says nothing about the answers, so training stopped. Check the grader: the reward server's log and "
                "GET /stats, grader worker crashes, LEAD_RECIPES_GRADE_TIMEOUT_S / --grade.timeout_s for this "
                "machine's speed, the label column (--data.label_key). Resume from the last checkpoint once fixed.")
        return {SHARE_KEY: share}


def observe_trainer(trainer, status: dict) -> dict[str, float]:
    """`GradingGuard.observe` with one guard per trainer, built from `trainer.args.recipe` on first use."""
    guard = getattr(trainer, "_recipe_grading_guard", None)
    if guard is None:
        guard = trainer._recipe_grading_guard = GradingGuard.from_recipe(getattr(trainer.args, "recipe", None))
    return guard.observe(status)


def grading_failure(exc: BaseException) -> GradingFailure | None:
    """The GradingFailure behind `exc`: itself, or the cause of a RayTaskError from ray.get."""
    for _ in range(8):  # the original exception, not Ray's subclass of it (its text repeats the traceback)
        cause = getattr(exc, "cause", None) or exc.__cause__
        if cause is None:
            return exc if isinstance(exc, GradingFailure) else None
        exc = cause
    return None
