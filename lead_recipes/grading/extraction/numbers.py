"""Number forms: mixed numbers, repeating decimals, thousands separators and decimal commas (`align_numbers`),
written the one way the exact paths and math-verify read, and a plain number literal as an exact Fraction
(`rational`). No values compared (`precision` does that), no sympy.
See docs/grading.md#answer-forms.
"""

from __future__ import annotations

import re
from fractions import Fraction

_DEC_RE = re.compile(r"(-?)([0-9]{1,12})(?:\.([0-9]{1,8}))?")
_FRAC_RE = re.compile(
    r"(-?)\\[dt]?frac\{(-?[0-9]{1,9})\}\{([0-9]{1,9})\}|(-?)([0-9]{1,9})/([0-9]{1,9})|"
    r"(-?)\\[dt]?frac([0-9])([0-9])"
)


def rational(s: str):
    """A plain decimal or integer fraction literal (`-12`, `3.25`, `\\frac{3}{8}`, `\\frac38`, `\\dfrac{-1}{2}`,
    `7/4`) as an exact Fraction, or None for anything else."""
    m = _DEC_RE.fullmatch(s)
    if m:
        v = Fraction(int(m.group(2)) * 10 ** len(m.group(3) or "") + int(m.group(3) or 0), 10 ** len(m.group(3) or ""))
        return -v if m.group(1) else v
    m = _FRAC_RE.fullmatch(s)
    if m:
        sign, num, den = next(m.group(i, i + 1, i + 2) for i in (1, 4, 7) if m.group(i + 1) is not None)
        if int(den) == 0:
            return None
        v = Fraction(int(num), int(den))
        return -v if sign else v
    return None


_MIXED_RE = re.compile(
    r"(-?)(\d{1,9})\s*(?:\\[dt]?frac\{(\d{1,9})\}\{(\d{1,9})\}|\\[dt]?frac(\d)(\d)|\s(\d{1,9})/(\d{1,9}))"
)
_THOUSANDS_RE = re.compile(r"-?[1-9]\d{0,2}(?:(?:,|\{,\}|\\,|\\ |\s)\d{3})+(?:\.\d+)?")
_DECIMAL_COMMA_RE = re.compile(r"-?\d+(?:,|\{,\})\d+")
PLAIN_RE = re.compile(r"-?\d+(?:\.\d+)?")
_REPEATING_RE = re.compile(r"(-?)(\d{1,9})\.(\d{0,9})\\(?:overline|bar)\s*(?:\{(\d{1,9})\}|(\d))")
_CANDIDATE_RE = re.compile(r"\d\s*\\[dt]?frac|\d\s+\d|\d(?:,|\{,\}|\\,|\\ )\d|\\overline|\\bar")  # rewritten here


def _mixed(s: str) -> str | None:
    m = _MIXED_RE.fullmatch(s.strip())
    if m is None:
        return None
    whole = int(m.group(2))
    num, den = next(
        (int(a), int(b))
        for a, b in ((m.group(3), m.group(4)), (m.group(5), m.group(6)), (m.group(7), m.group(8)))
        if a is not None
    )
    if den == 0 or num >= den:
        return None
    v = whole + Fraction(num, den)
    v = -v if m.group(1) else v
    return str(v.numerator) if v.denominator == 1 else f"\\frac{{{v.numerator}}}{{{v.denominator}}}"


def _repeating(s: str) -> str | None:
    """`0.1\\overline{6}` / `0.\\bar{3}` → the exact fraction (`\\frac{1}{6}`); None for anything else."""
    m = _REPEATING_RE.fullmatch(s.strip())
    if m is None:
        return None
    fixed, period = m.group(3), m.group(4) or m.group(5)
    v = int(m.group(2)) + (Fraction(int(fixed or 0)) + Fraction(int(period), 10 ** len(period) - 1)) / 10 ** len(fixed)
    v = -v if m.group(1) else v
    return str(v.numerator) if v.denominator == 1 else f"\\frac{{{v.numerator}}}{{{v.denominator}}}"


def _items(s: str) -> list[str]:
    # Not `brackets.top_items`: a comma splits only before a space, so `1,000` and `1,5` stay one number.
    return [x.strip() for x in (s.split(";") if ";" in s else re.split(r",\s+", s))]


def _plain(item: str, other: str, decimal_comma: bool = True) -> str:
    """`item` without separators when `other` is the plain number it then reads as; else `item`. A decimal comma is
    read only with `decimal_comma` (the prediction's side: a gold `1,5` is the list it is written as)."""
    if not PLAIN_RE.fullmatch(other):
        return item
    if _THOUSANDS_RE.fullmatch(item):
        return re.sub(r",|\{,\}|\\,|\\ |\s", "", item)
    if decimal_comma and _DECIMAL_COMMA_RE.fullmatch(item) and "." in other:
        return re.sub(r",|\{,\}", ".", item)
    return item


def align_numbers(gold: str, pred: str) -> tuple[str, str]:
    """(gold, pred) with mixed numbers and separators rewritten (see the module docstring); never raises."""
    if not _CANDIDATE_RE.search(gold) and not _CANDIDATE_RE.search(pred):
        return gold, pred
    gi, pi = _items(gold), _items(pred)
    if len(gi) != len(pi) or len(gi) > 50:
        return gold, pred
    gi = [_mixed(x) or _repeating(x) or x for x in gi]
    pi = [_mixed(x) or _repeating(x) or x for x in pi]
    g2, p2 = [_plain(a, b, decimal_comma=False) for a, b in zip(gi, pi)], [_plain(b, a) for a, b in zip(gi, pi)]
    sep = "; " if ";" in gold or ";" in pred else ", "
    return (gold if g2 == _items(gold) else sep.join(g2)), (pred if p2 == _items(pred) else sep.join(p2))
