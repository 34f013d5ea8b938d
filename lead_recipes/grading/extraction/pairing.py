"""Several boxed answers: which boxes of a response make up its final answer (the last box and the boxes of the
same closing statement before it), whether a gold is a list of several values, and one list answer joined from
several boxes. No extraction policy (`answers` decides when this is used), no values parsed.
See docs/grading.md#extraction-policies.
"""

from __future__ import annotations

import re

from lead_recipes.grading.extraction.brackets import top_items

MAX_BOX_CHARS = 16_000  # brace matching gives up this far after `\boxed{`
_MAX_BOXES = 64  # box commands read, the last ones of the text
_GAP_CHARS = 200  # boxes further apart than this are separate statements
BOX_RE = re.compile(r"\\(?:boxed|fbox)")
BRACE_RE = re.compile(r"(?<!\\)[{}]")
_MOVES_ON_RE = re.compile(
    r"(?i)\b(?:so|then|therefore|thus|hence|wait|actually|instead|but|however|substitut\w*|"
    r"plug\w*|using|now|next|not|final\s+answers?)\b"
)
# A box its own clause rejects ("We reject $x = \boxed{-1}$", "$\boxed{-1}$ is extraneous") is no part of the list.
REJECTED_RE = re.compile(
    r"(?i)\b(?:reject\w*|discard\w*|exclud\w*|eliminat\w*|extraneous|spurious|wrong|incorrect|invalid|fail\w*|"
    r"ruled?\s+out)\b"
)
# `x = \boxed{2}`: the label written just before a box, inside the same math span.
_LABEL_BEFORE_RE = re.compile(r"(?<![\\A-Za-z])([A-Za-z](?:_\{?\w+\}?)?)\s*=\s*\Z")


def box_content(text: str, start: int) -> tuple[str, int] | None:
    """(content, end) of the `\\boxed` command whose name ends at `start`: `{...}` with nested braces, or
    `\\boxed 5`; None when it is not a box or is never closed."""
    n, i = len(text), start
    while i < n and text[i] in " \t":
        i += 1
    if i >= n:
        return None
    if text[i] != "{":
        if i == start:  # `\boxedx` is another command, not `\boxed x`
            return None
        m = re.match(r"[^\s$]+", text[i : i + MAX_BOX_CHARS // 4 + 1])
        return (m.group(0), i + m.end()) if m else None
    depth = 0
    for m in BRACE_RE.finditer(text, i, min(n, i + MAX_BOX_CHARS)):
        depth += 1 if m.group(0) == "{" else -1
        if depth == 0:
            return text[i + 1 : m.start()], m.end()
    return None


def box_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, stripped content) of each complete, non-empty box among the last `_MAX_BOXES` box commands, in
    order. Read from the end, as the last box always was: of two boxes that overlap (one nested in the other) the
    later-starting one is kept."""
    starts = [m for m in BOX_RE.finditer(text)][-_MAX_BOXES:]
    out: list[tuple[int, int, str]] = []
    for m in reversed(starts):
        got = box_content(text, m.end())
        if got is None or not got[0].strip() or (out and got[1] > out[-1][0]):
            continue  # unclosed, empty, or around a box already read
        out.append((m.start(), got[1], got[0].strip()))
    return out[::-1]


def last_box(text: str) -> tuple[int, int, str] | None:
    """The last span of `box_spans(text)`, found from the end without reading the earlier boxes."""
    end = len(text)
    for _ in range(_MAX_BOXES):
        pos = max(text.rfind("\\boxed", 0, end), text.rfind("\\fbox", 0, end))
        if pos < 0:
            return None
        m = BOX_RE.match(text, pos)
        got = box_content(text, m.end()) if m is not None else None
        if got is not None and got[0].strip():
            return pos, got[1], got[0].strip()
        end = pos
    return None


def final_run(text: str, spans: list[tuple[int, int, str]], labelled: bool = False) -> list[str]:
    """Contents of the last box and of the boxes before it in the same closing statement (see the docstring; a box
    its own clause rejects ends the statement). With
    `labelled` (the gold names its values) a label written just before every box is kept: `y = \boxed{3}` is
    `y = 3`."""
    run = [spans[-1]]
    for i in range(len(spans) - 2, -1, -1):
        prev = spans[i]
        gap = text[prev[1] : run[0][0]]
        lead = re.split(r"[.!?\n,;:)]", text[max(spans[i - 1][1] if i else 0, prev[0] - 80) : prev[0]])[-1]
        if len(gap) > _GAP_CHARS or _MOVES_ON_RE.search(gap) or REJECTED_RE.search(gap + " " + lead):
            break
        run.insert(0, prev)
    labels = [_LABEL_BEFORE_RE.search(text, max(0, start - 40), start) for start, _, _ in run]
    if labelled and all(labels) and len({m.group(1) for m in labels}) == len(run) > 1:
        return [f"{m.group(1)} = {c}" for m, (_, _, c) in zip(labels, run)]
    return [c for _, _, c in run]


_SET_RE = re.compile(r"\s*(?:\\left)?\\\{(.*)(?:\\right)?\\\}\s*", re.S)
_BARE_SET_RE = re.compile(r"\s*\{([^{}]*,[^{}]*)\}\s*")  # `{1,2,3}`: a set written without `\{`
_TEXT_LIST_RE = re.compile(r"\s*\\(?:text|textbf|mathrm|textrm|mbox)\{([^{}]*)\}\s*")
_OR_ITEM_RE = re.compile(r"\\text\{\s*or\s*\}|\bor\b")
_ITEM_LABEL_RE = re.compile(r"\s*([A-Za-z](?:_\{?\w+\}?)?)\s*=(?!=)")


def is_list(gold: str) -> bool:
    """True when `gold` holds several values: a list (also inside one `\\text{}`), a set in braces (`\\{1, 2\\}` or
    a bare `{1, 2}`), values joined
    by "or", or `\\pm`."""
    m = _SET_RE.fullmatch(gold) or _BARE_SET_RE.fullmatch(gold) or _TEXT_LIST_RE.fullmatch(gold)
    body = m.group(1) if m else gold
    if "\\pm" in body or "\\mp" in body:
        return True
    if re.fullmatch(r"\s*-?\d{1,3}(?:(?:,|\{,\})(?:\\!)?\d{3})+(?:\.\d+)?\s*", body):
        return False  # `1,000`, `900,\!000` are one number
    return len(top_items(body)) > 1 or len(_OR_ITEM_RE.split(body)) > 1


def is_labelled(gold: str) -> bool:
    """True when `gold` is a list whose every item carries its own label (`x=1, y=2`)."""
    labels = [_ITEM_LABEL_RE.match(x) for x in top_items(gold)]
    return len(labels) > 1 and all(labels) and len({m.group(1) for m in labels}) == len(labels)


def join(values: list[str]) -> str:
    """`a, b, c` from several values, repeats kept (`1, 1, 2`: a root of multiplicity two)."""
    return ", ".join(v for v in values if v)


def gold_text(gold: str) -> str:
    """A gold stored as `\\boxed{...}`: its box, or all its boxes joined; a gold without a complete box unchanged."""
    spans = box_spans(gold)
    return join([c for _, _, c in spans]) if spans else gold
