"""Progress on long work: `Bar`, a tqdm bar on stderr (steps done / total, rate, ETA) that prints its full bar once
(grade, replay), and `StepProgress`, the one line per trained step that `lead-recipes train` logs (step, prompts
consumed of the run's total, time per step, ETA). Display only: it counts nothing that is saved.
See docs/training.md#logged-per-step-wb--tensorboard-train and docs/methods.md#replay-lead-recipes-replay.
"""

from __future__ import annotations

import sys
import time


class Bar:
    """A tqdm bar on stderr over `total` units, or nothing when disabled (or total is 0)."""

    def __init__(self, total: int, desc: str, unit: str, enabled: bool = True):
        self.total = total
        self.bar = None
        if enabled and total:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)

    def advance_to(self, n: int) -> None:
        if self.bar is None:
            return
        if n >= self.total:  # close() prints the full bar: an update would print it a second time in a log
            self.bar.n = n
        else:
            self.bar.update(n - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def duration(seconds: float) -> str:
    """`45s`, `3m 07s`, `2h 05m`, `3d 4h`."""
    s = max(0, int(round(seconds)))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m:02d}m"
    return f"{m}m {s:02d}s" if m else f"{s}s"


class StepProgress:
    """Where a run stands after each step: prompts consumed of `total_prompts` (episodes x dataset, as OpenRLHF's
    own bar counts them; None when this process cannot know it), mean time per step and the ETA, both measured from
    `started` (this process's start of training, at `start_step` with `start_prompts` consumed: a resumed run
    counts from its checkpoint)."""

    def __init__(self, total_prompts: int | None, start_step: int, start_prompts: int, started: float | None = None):
        self.total, self.start_step, self.start_prompts = total_prompts, start_step, start_prompts
        self.started = time.monotonic() if started is None else started

    def line(self, step: int, prompts: int, now: float | None = None) -> str:
        elapsed = (time.monotonic() if now is None else now) - self.started
        steps, done = max(step - self.start_step, 1), max(prompts - self.start_prompts, 0)
        per_step = f"{duration(elapsed / steps)}/step"
        if not self.total:
            return f"lead-recipes: step {step}, {prompts} prompts, {per_step}"
        left = max(self.total - prompts, 0)
        all_steps = step + (-(-left * steps // done) if done else 0)
        eta = duration(left * elapsed / done) if done else "unknown"
        return (
            f"lead-recipes: step {step}/~{all_steps}, {prompts}/{self.total} prompts ({prompts / self.total:.1%}), "
            f"{per_step}, ETA {eta}"
        )
