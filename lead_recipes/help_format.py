"""The argparse layer every lead-recipes command shares: each flag's default shown once in `--help`, text wrapped at
spaces only (recipe names such as `grpo-lead-14b-stage2` are never split at a hyphen), no abbreviated flags, and an
unknown flag's error naming the closest real one. The flag rules: CONTRIBUTING.md, Conventions."""

from __future__ import annotations

import argparse
import copy
import difflib
import re
import textwrap
from typing import Iterable

_DEFAULT = re.compile(r"\bdefault\b", re.I)  # a word: `eval_default_pass1` is not one


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with every flag's default shown once (also for a flag without help text) and
    hyphen-safe wrapping."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.required or action.default is argparse.SUPPRESS:
            return text
        if _DEFAULT.search(text):  # the text says it (in words where None needs them)
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"

    def _format_action(self, action: argparse.Action) -> str:
        # argparse prints no help column at all for a flag without help text, so its default would stay unshown
        if not action.help and action.option_strings and self._get_help_string(action):
            action = copy.copy(action)
            action.help = self._get_help_string(action)
        return super()._format_action(action)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
            break_long_words=False,
        )


def did_you_mean(flag: str, known: Iterable[str]) -> str:
    """' (did you mean --y?)' for the flag of `known` closest to `flag`, '' when none is close."""
    close = difflib.get_close_matches(flag, sorted(set(known)), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def option_strings(parser: argparse.ArgumentParser, namespace: argparse.Namespace | None = None) -> set[str]:
    """Every option string of `parser` and of its subcommands (only the chosen one's when `namespace` says)."""
    out: set[str] = set()
    for action in parser._actions:
        out.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(namespace, action.dest, None)
            for name, sub in action.choices.items():
                if chosen in (None, name):
                    out |= option_strings(sub, namespace)
    return out


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with HelpFormatter, allow_abbrev=False and a did-you-mean for the first unknown flag."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            flags = [x.split("=", 1)[0] for x in extras if x.startswith("--") and x != "--"]
            hint = did_you_mean(flags[0], option_strings(self, namespace)) if flags else ""
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return namespace
