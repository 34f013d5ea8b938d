"""The grading options, declared once: each `--grade.*` flag's type, default, choices or range and help, the
`Grader` keyword it sets and the environment variable that sets it for the process-wide grader (`get_grader`).
`lead-recipes grade`, `serve` and `eval` add their flags from here (`add_options`), `Grader` takes its keyword
defaults from here and `get_grader` reads the environment through `GradeOption.from_env`. No grading here.
See docs/grading.md.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from lead_recipes.grading.equivalence.precision import DEFAULT_REL_TOL
from lead_recipes.grading.extraction.answers import EXTRACTION_POLICIES
from lead_recipes.methods.fields import range_problem

# The reward reads only the box (rewards teach the format); a report (`grade`, `eval`) also reads a closing "the
# answer is ..." statement, so its accuracy compares with math-verify's and lighteval's. Both deliberate.
REPORT_EXTRACTION = "final_answer"


@dataclass(frozen=True)
class GradeOption:
    """One option: `--grade.<name>` (argparse dest `grade.<name>`) of type `type` (bool: `--[no-]grade.<name>`);
    `choices` for a string, `bounds` for a number (the `ge`/`gt`/`le`/`lt` of lead_recipes.methods.fields.BOUNDS);
    `grader`: the Grader keyword it sets; `env`: the variable that sets it for `get_grader` (unset or blank: the
    default)."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    bounds: Mapping[str, float] = field(default_factory=dict)
    grader: str | None = None
    env: str | None = None

    @property
    def flag(self) -> str:
        return f"--grade.{self.name}"

    @property
    def dest(self) -> str:
        return f"grade.{self.name}"

    def check(self, value: float) -> None:
        """ValueError naming the Grader keyword when the number `value` is outside `bounds` (Grader's arguments)."""
        problem = range_problem(value, self.bounds)
        if problem:
            raise ValueError(f"{self.grader} must be {problem}, got {value!r}")

    def parse(self, raw: str) -> Any:
        """`raw` as this option's value; ValueError (saying what it must be) for anything else."""
        text = raw.strip()
        if self.type is bool:
            if text not in ("0", "1"):
                raise ValueError(f"must be 0 or 1, got {raw!r}")
            return text == "1"
        if self.choices:
            if text not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}, got {raw!r}")
            return text
        try:
            value = self.type(text)
        except ValueError:
            raise ValueError(f"must be {'an integer' if self.type is int else 'a number'}, got {raw!r}") from None
        problem = range_problem(value, self.bounds)
        if problem:
            raise ValueError(f"must be {problem}, got {raw!r}")
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
        ),
        GradeOption(
            "timeout_s",
            float,
            5.0,
            "per-answer hard limit in seconds, counted from when a worker starts it",
            bounds={"gt": 0},
            grader="timeout_s",
            env="LEAD_RECIPES_GRADE_TIMEOUT_S",
        ),
        GradeOption(
            "workers",
            int,
            None,
            "grader worker processes (default: usable CPUs, at most 8)",
            bounds={"ge": 1},
            grader="workers",
            env="LEAD_RECIPES_GRADE_WORKERS",
        ),
        GradeOption(
            "rel_tol",
            float,
            DEFAULT_REL_TOL,
            "relative precision within which a decimal approximates a value whose expansion does not end (1/3, pi), "
            "besides the digits it writes, when the problem text states none",
            bounds={"ge": 0, "lt": 1},
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


def add_options(parser: Any, names: Iterable[str], **defaults: Any) -> None:
    """Add `--grade.<name>` for each of `names`, in that order, to an argparse parser or argument group;
    `defaults`: the command's own default of an option, by name (`grade`, `eval`: extraction=REPORT_EXTRACTION)."""
    for name in names:
        opt = OPTIONS[name]
        kwargs: dict[str, Any] = {"dest": opt.dest, "default": defaults.get(name, opt.default), "help": opt.help}
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
