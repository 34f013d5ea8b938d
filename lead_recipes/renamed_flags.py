"""One-line hints for the command-line spellings that the dotted flag grammar replaced (`--dry-run` is now
`--run.dry_run_enable`, `--partition` is now `--slurm.partition`, ...), so that an old flag fails with the new name
instead of argparse's bare "unrecognized arguments". Each command keeps a table of renames that are not mechanical;
given the command's parser, any other old dashed spelling `--a-b` is matched to the one flag named `--group.a_b`
(or `--group.a_b_enable`). It only names the new spelling; it accepts no old one."""
from __future__ import annotations

import argparse
import sys


def parser_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of `parser` and of its subcommands' parsers."""
    out: set[str] = set()
    for action in parser._actions:
        out.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= parser_options(sub)
    return out


def renamed_hint(argv: list[str], table: dict[str, str], parser: argparse.ArgumentParser | None = None) -> str | None:
    """'OLD is now NEW' for the first old spelling among argv's flags (up to a `--`), else None. Without a parser
    (a command that passes unknown flags on, like `lead-recipes train`) only the table is consulted."""
    known = parser_options(parser) if parser is not None else set()
    for token in argv:
        if token == "--":
            break
        old = token.split("=", 1)[0]
        if not old.startswith("-") or old in known:
            continue
        if old in table:
            return f"{old} is now {table[old]}"
        if not old.startswith("--"):
            continue
        name = old[2:].replace("-", "_")
        matches = sorted(o for o in known if "." in o and o.rsplit(".", 1)[1] in (name, f"{name}_enable"))
        if len(matches) == 1:
            return f"{old} is now {matches[0]}"
    return None


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None, table: dict[str, str]) -> argparse.Namespace:
    """`parser.parse_args(argv)`, but an old spelling is a usage error naming the new flag (exit 2)."""
    hint = renamed_hint(sys.argv[1:] if argv is None else list(argv), table, parser)
    if hint:
        parser.error(hint)
    return parser.parse_args(argv)
