"""Vectors and matrices written in different notations (pmatrix, bracket lists, tuples, angle brackets, a transposed
row `(1, 2)^T`): `align_vectors` rewrites a pair of the same shape into one notation, entries moved verbatim; a
bracket list alone is never rewritten, and a two-item bracket gold is an interval, never a vector. No parsing of
entries, no verdicts. See docs/grading.md#answer-forms.
"""

from __future__ import annotations

import re

from lead_recipes.grading.extraction.brackets import LR_RE, top_items, tuple_items

_ENV_RE = re.compile(r"\\begin\{([pbB]?matrix)\}(.*?)\\end\{\1\}", re.S)
_ANGLE_RE = re.compile(r"\\(?:left)?\\?langle(.*?)\\(?:right)?\\?rangle", re.S)
_TRANSPOSED_RE = re.compile(r"(.+?)\s*\^\s*(?:\{\s*(?:T|\\top|\\intercal)\s*\}|T|\\top|\\intercal)\s*", re.S)


def _env_rows(s: str) -> list[list[str]] | None:
    """Rows of entries of a matrix environment, or None."""
    m = _ENV_RE.fullmatch(s.strip())
    if m is None:
        return None
    rows = [[e.strip() for e in r.split("&")] for r in re.split(r"\\\\", m.group(2)) if r.strip()]
    return rows if rows and len({len(r) for r in rows}) == 1 and all(all(r) for r in rows) else None


def _bracket_rows(s: str) -> list[list[str]] | None:
    """Rows of `[[a, b], [c, d]]` (a matrix) or `[a, b, c]` (one row), or None."""
    s = LR_RE.sub("", s.strip())
    if not (s.startswith("[") and s.endswith("]")):
        return None
    items = top_items(s[1:-1])
    if len(items) >= 2 and all(x.startswith("[") and x.endswith("]") for x in items):
        rows = [top_items(LR_RE.sub("", x)[1:-1]) for x in items]
        return rows if len({len(r) for r in rows}) == 1 and len(rows[0]) >= 2 and all(all(r) for r in rows) else None
    return [items] if len(items) >= 2 and all(items) else None


def _vector(s: str) -> list[str] | None:
    """Entries of a row/column vector environment or an angle-bracket vector, else None."""
    rows = _env_rows(s)
    if rows is not None:
        if len(rows) >= 2 and len(rows[0]) == 1:
            return [r[0] for r in rows]
        return rows[0] if len(rows) == 1 and len(rows[0]) >= 2 else None
    m = _ANGLE_RE.fullmatch(s.strip())
    if m is not None and len(top_items(m.group(1))) >= 2:
        return top_items(m.group(1))
    return None


def _pmatrix(rows: list[list[str]]) -> str:
    return "\\begin{pmatrix}" + " \\\\ ".join(" & ".join(r) for r in rows) + "\\end{pmatrix}"


def _transposed(s: str) -> str:
    """`(1, 2)^T` / `[1, 2]^{T}` / a one-row matrix with `^\\top` → the column vector it is; else `s`."""
    m = _TRANSPOSED_RE.fullmatch(s.strip())
    if m is None:
        return s
    rows = _env_rows(m.group(1))
    row = rows[0] if rows and len(rows) == 1 else tuple_items(m.group(1)) or (_bracket_rows(m.group(1)) or [None])[0]
    return _pmatrix([[x] for x in row]) if row and len(row) >= 2 else s


def align_vectors(gold: str, pred: str) -> tuple[str, str] | None:
    """(gold, pred) in one notation when they are a matrix or vector in two notations of the same kind, else None."""
    if not any(t in gold or t in pred for t in ("matrix", "langle")):
        return None  # no vector notation: nothing to align (the common case)
    gold, pred = _transposed(gold), _transposed(pred)
    ge, pe = _env_rows(gold), _env_rows(pred)
    gb, pb = _bracket_rows(gold), _bracket_rows(pred)
    if gb and len(gb) == 1 and len(gb[0]) == 2:
        gb = None  # a gold `[1, 2]` is the interval, whatever the answer
    g_mat = ge if ge and len(ge) >= 2 and len(ge[0]) >= 2 else gb if gb and len(gb) >= 2 else None
    p_mat = pe if pe and len(pe) >= 2 and len(pe[0]) >= 2 else pb if pb and len(pb) >= 2 else None
    if g_mat and p_mat and (ge is None) != (pe is None):
        return _pmatrix(g_mat), _pmatrix(p_mat)
    gv, pv = _vector(gold), _vector(pred)
    if gv is None and pv is None:
        return None
    g_flat = gv or (gb[0] if gb and len(gb) == 1 else None) or tuple_items(gold)
    p_flat = pv or (pb[0] if pb and len(pb) == 1 else None) or tuple_items(pred)
    if g_flat and p_flat:
        return "(" + ", ".join(g_flat) + ")", "(" + ", ".join(p_flat) + ")"
    return None
