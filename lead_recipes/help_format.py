"""The `--help` layout every lead-recipes command shares: each flag's default is shown (unless its help text already
says it), and text is wrapped at spaces only, so recipe names such as `grpo-lead-14b-stage2` and dotted flags are
never split at a hyphen. It changes how help looks, never how arguments parse."""
from __future__ import annotations

import argparse
import textwrap


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with defaults appended and hyphen-safe wrapping."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = "default" in text.lower() or "%(default)" in text
        if shown or action.default in (None, argparse.SUPPRESS, False) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)
