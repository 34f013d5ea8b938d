"""Strict JSONL reading shared by `lead-recipes data`, `replay` and `evaluation`: blank lines skipped, a malformed line
a ValueError naming `origin:lineno`. No shape checks, no torn-line tolerance (that is `evaluation.store`); standard
library only, since `evaluation` imports it.
"""

from __future__ import annotations

import json
from pathlib import Path


def parse_jsonl(text: str, origin: str | Path) -> list[dict]:
    """One JSON value per line of `text` (split on "\\n" only, as file iteration does, so a raw U+2028 inside a
    JSON string stays part of its line); blank lines skipped; a malformed line → ValueError `origin:lineno: invalid
    JSON (msg)`."""
    rows = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{origin}:{lineno}: invalid JSON ({exc.msg})") from None
    return rows


def read_jsonl(path: str | Path) -> list[dict]:
    """`parse_jsonl` of a UTF-8 file (universal newlines); errors name the file as `path:lineno`."""
    return parse_jsonl(Path(path).read_text(encoding="utf-8"), path)
