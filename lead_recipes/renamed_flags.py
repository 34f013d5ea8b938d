"""One-line hints for the command-line spellings that the dotted flag grammar replaced (`--dry-run` is now
`--run.dry_run_enable`, `--out` is now `--output`, ...), so that the flags users type most fail with the new name
instead of argparse's bare "unrecognized arguments". It only names the new spelling; it accepts no old one."""
from __future__ import annotations

# Shared by several commands; each command adds its own renames to these.
COMMON = {"--dry-run": "--run.dry_run_enable", "--out": "--output"}


def renamed_hint(argv: list[str], table: dict[str, str]) -> str | None:
    """'OLD is now NEW' for the first old spelling among argv's flags (up to a `--`), else None."""
    for token in argv:
        if token == "--":
            break
        old = token.split("=", 1)[0]
        if old in table:
            return f"{old} is now {table[old]}"
    return None
