"""`lead-recipes doctor [TRAIN FLAGS]`: what is wrong on this GPU node, one line per check with its remedy
(lead_recipes.training.doctor), then a summary; exit 1 if any check failed. Train flags (e.g. `--recipe.name
lead-1.5b`) are resolved as `lead-recipes train` resolves them, to check the packages that run needs.
See docs/gpu.md.
"""

from __future__ import annotations

import sys

from lead_recipes.help_format import ArgumentParser, did_you_mean, option_strings
from lead_recipes.training.doctor import DEFAULT_TIMEOUT, report_line, run_doctor

PROG = "lead-recipes doctor"


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Check this GPU node for the training stack: GPU, driver, flash-attn, FusedAdam, NCCL, vLLM and "
        "the optional packages the given `lead-recipes train` flags need. Other flags are train flags.",
    )
    parser.add_argument(
        "--doctor.timeout_s",
        dest="timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help="seconds each subprocess check may take (a first FusedAdam build is the slowest)",
    )
    return parser


def train_args(argv: list[str]):
    """The nested args `lead-recipes train ARGV` would train with (base recipe, our flags, OpenRLHF's validation)."""
    from lead_recipes.recipes.openrlhf_parser import openrlhf_args
    from lead_recipes.training.args import with_recipe
    from lead_recipes.training.cli import parse_command_line

    _, recipe, openrlhf_argv, _ = parse_command_line(list(argv))
    args, _ = openrlhf_args(openrlhf_argv)
    return with_recipe(args, recipe, openrlhf_argv)


def main(argv: list[str]) -> int:
    parser = _parser()
    ours, rest = parser.parse_known_args(argv)
    for flag in (token.split("=", 1)[0] for token in rest):
        if flag.startswith("--doctor."):  # ours, misspelled: not a train flag to look for among OpenRLHF's
            parser.error(f"unknown flag {flag}{did_you_mean(flag, option_strings(parser))}")
    args = None
    if rest:
        from lead_recipes.recipes import RecipeError
        from lead_recipes.recipes.openrlhf_parser import OpenRLHFMismatch
        from lead_recipes.training.cli import UsageError

        try:
            args = train_args(rest)
        except (UsageError, RecipeError, OpenRLHFMismatch, AssertionError) as exc:
            print(f"{PROG}: error: the train flags: {exc}", file=sys.stderr)
            return 2
    checks = run_doctor(args, timeout=ours.timeout)
    for check in checks:
        print(report_line(check), flush=True)
    failed = [c.name for c in checks if not c.ok]
    if failed:
        print(f"{PROG}: {len(failed)} of {len(checks)} checks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"{PROG}: all {len(checks)} checks passed", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
