"""The grading options, declared once: each `--grade.*` flag's type, default, choices or range and help, the
`Grader` keyword it sets and the environment variable that sets it for the process-wide grader (`get_grader`).
`lead-recipes grade`, `serve` and `eval` add their flags from here (`add_options`), `Grader` takes its keyword
defaults from here and `get_grader` reads the environment through `GradeOption.from_env`. No grading here.
See docs/grading.md.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from lead_recipes.grading.equivalence.precision import DEFAULT_REL_TOL
from lead_recipes.grading.extraction.answers import EXTRACTION_POLICIES


@dataclass(frozen=True)
class GradeOption:
    """One option: `--grade.<name>` (argparse dest `grade.<name>`) of type `type` (bool: `--[no-]grade.<name>`);
    `choices` for a string, `interval` for a number (e.g. "[0, 1)", "(0, inf)"); `grader`: the Grader keyword it
    sets; `env`: the variable that sets it for `get_grader` (unset or blank: the default). `report_default`, when
    set, replaces `default` in the commands that grade for a report rather than a reward (`grade`, `eval`)."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    interval: str | None = None
    grader: str | None = None
    env: str | None = None
    report_default: Any = None

    @property
    def flag(self) -> str:
        return f"--grade.{self.name}"

    @property
    def dest(self) -> str:
        return f"grade.{self.name}"

    def default_for(self, report: bool) -> Any:
        return self.report_default if report and self.report_default is not None else self.default

    @property
    def expected(self) -> str:
        """What a value must be, for error messages: "a number in [0, 1)", "one of boxed, final_answer", ..."""
        if self.type is bool:
            return "0 or 1"
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        if self.type is int:
            return "an integer"
        if self.interval is None:
            return "a number"
        low, high = self._bounds()
        if math.isinf(high):
            return f"a number {'>=' if self.interval[0] == '[' else '>'} {low:g}"
        return f"a number in {self.interval}"

    def _bounds(self) -> tuple[float, float]:
        if self.interval is None:
            return -math.inf, math.inf
        low, high = self.interval[1:-1].split(",")
        return float(low), float(high)

    def in_range(self, value: float) -> bool:
        """Whether a number lies in `interval` (NaN never does; no interval: any number)."""
        if self.interval is None:
            return True
        low, high = self._bounds()
        above = low <= value if self.interval[0] == "[" else low < value
        below = value <= high if self.interval[-1] == "]" else value < high
        return above and below

    def check(self, value: Any, name: str) -> None:
        """ValueError naming `name` when the number `value` is outside `interval` (Grader's own arguments)."""
        if not self.in_range(value):
            raise ValueError(f"{name} must be {self.expected}, got {value!r}")

    def parse(self, raw: str) -> Any:
        """`raw` as this option's value; ValueError (saying what it must be) for anything else."""
        text = raw.strip()
        if self.type is bool:
            if text not in ("0", "1"):
                raise ValueError(f"must be {self.expected}, got {raw!r}")
            return text == "1"
        if self.choices:
            if text not in self.choices:
                raise ValueError(f"must be {self.expected}, got {raw!r}")
            return text
        try:
            value = self.type(text)
        except ValueError:
            raise ValueError(f"must be {self.expected}, got {raw!r}") from None
        if not self.in_range(value):
            raise ValueError(f"must be {self.expected}, got {raw!r}")
        return value

    def from_env(self, environ: Mapping[str, str] | None = None) -> Any:
        """The value `env` gives (unset or blank: the default); a bad value is a ValueError naming the variable."""
        raw = (os.environ if environ is None else environ).get(self.env or "", "")
        if not raw.strip():
            return self.default
        try:
            return self.parse(raw)
        except ValueError as e:
            raise ValueError(f"{self.env} {e}") from None


OPTIONS: dict[str, GradeOption] = {
    o.name: o
    for o in (
        GradeOption(
            "use",
            str,
            "auto",
            "which field to grade: auto = `response` when present, else `given_answer`",
            ("auto", "response", "given_answer"),
        ),
        GradeOption(
            "extraction",
            str,
            "boxed",
            "how the answer is found in a response: boxed = the last \\boxed{} only (what the reward uses: it teaches "
            "the format); final_answer = the box, else the final-answer statement of the closing part (comparable "
            "with math-verify and lighteval numbers)",
            EXTRACTION_POLICIES,
            grader="extraction",
            env="LEAD_RECIPES_EXTRACTION",
            # The reward reads only the box (rewards teach the format); a report also reads a closing "the answer
            # is ..." statement, so its accuracy compares with math-verify's and lighteval's. Both deliberate.
            report_default="final_answer",
        ),
        GradeOption(
            "timeout_s",
            float,
            5.0,
            "per-answer hard limit in seconds, counted from when a worker starts it",
            interval="(0, inf)",
            grader="timeout_s",
            env="LEAD_RECIPES_GRADE_TIMEOUT_S",
        ),
        GradeOption(
            "workers",
            int,
            None,
            "grader worker processes (default: usable CPUs, at most 8)",
            grader="workers",
            env="LEAD_RECIPES_GRADE_WORKERS",
        ),
        GradeOption(
            "rel_tol",
            float,
            DEFAULT_REL_TOL,
            "relative precision of a decimal against a value whose expansion does not end (1/3, pi) when the "
            "problem text states none",
            interval="[0, 1)",
            grader="rel_tol",
            env="LEAD_RECIPES_GRADE_REL_TOL",
        ),
        GradeOption(
            "problem_precision_enable",
            bool,
            True,
            'read a precision stated in the problem text ("to the nearest hundredth", "to 3 decimal places")',
            grader="problem_precision",
            env="LEAD_RECIPES_GRADE_PROBLEM_PRECISION",
        ),
        GradeOption("progress_enable", bool, True, "tqdm progress bar on stderr"),
    )
}


def add_options(parser: Any, names: Iterable[str], *, report: bool = False) -> None:
    """Add `--grade.<name>` for each of `names`, in that order, to an argparse parser or argument group; `report`:
    the command grades for a report (each option's `report_default` applies)."""
    for name in names:
        opt = OPTIONS[name]
        kwargs: dict[str, Any] = {"dest": opt.dest, "default": opt.default_for(report), "help": opt.help}
        if opt.type is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif opt.choices:
            kwargs["choices"] = opt.choices
        else:
            kwargs["type"] = _arg_type(opt)
        parser.add_argument(opt.flag, **kwargs)


def _arg_type(opt: GradeOption):
    def parse(raw: str) -> Any:
        try:
            return opt.parse(raw)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def grader_kwargs(args: Mapping[str, Any]) -> dict[str, Any]:
    """Grader keywords from parsed flags (`vars(namespace)`): each option the parser has that sets one."""
    return {o.grader: args[o.dest] for o in OPTIONS.values() if o.grader and o.dest in args}


def grader_kwargs_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Grader keywords from the environment (`get_grader`): every option with a variable, unset ones at default."""
    return {o.grader: o.from_env(environ) for o in OPTIONS.values() if o.env and o.grader}
