"""Bracket-aware splitting of short LaTeX answers, shared by the grader's extraction and answer-form modules:
string positions only, no parsing of values, no verdicts. See docs/grading.md#answer-forms.
"""

from __future__ import annotations

import re

OPEN, CLOSE = "{([", "})]"
COMMA_RE = re.compile(r",|;|\\text\{\s*and\s*\}|\\quad|\\qquad")
LR_RE = re.compile(r"\\(?:left|right)(?=[\[\]()])")  # `\left(` → `(`: sizing commands before a bracket


def top_split(s: str, seps: re.Pattern) -> list[str]:
    """`s` split at matches of `seps` that are outside braces, parentheses and brackets (`\\left(`/`\\{` count)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and s.startswith(("\\{", "\\}"), i):
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if ch in OPEN:
            depth += 1
        elif ch in CLOSE:
            depth -= 1
        elif depth == 0:
            m = seps.match(s, i)
            if m and m.end() > i:
                parts.append(s[start:i])
                start = i = m.end()
                continue
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def top_items(s: str) -> list[str]:
    """The top-level list items of `s` (`1, (2, 3); 4` → [`1`, `(2, 3)`, `4`])."""
    return top_split(s, COMMA_RE)


def is_tuple(s: str) -> bool:
    """`(a, b, ...)`: one pair of outer parentheses around ≥ 2 top-level items."""
    s = re.sub(r"\\(?:left|right)(?=[()])", "", s.strip())
    if not (s.startswith("(") and s.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(s):
        depth += ch in OPEN
        depth -= ch in CLOSE
        if depth == 0 and i < len(s) - 1:
            return False  # `(a)+(b)`: the first parenthesis closes early
    return len(top_items(s[1:-1])) > 1


def tuple_items(s: str) -> list[str] | None:
    """Items of a tuple `(a, b)` / `\\left(a, b\\right)`, else None."""
    return top_items(LR_RE.sub("", s.strip())[1:-1]) if is_tuple(s) else None
