"""How close a decimal must be to an exact value: the precision a problem states (`stated_precision`: "to the nearest
hundredth", "to 3 decimal places", "to 2 significant figures"), else a relative precision (`DEFAULT_REL_TOL`), and
the verdict for two numbers under it (`number_verdict`, also used by the workers for constants such as `\\pi`).
Regular expressions and exact fractions only. See docs/grading.md#precision.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from lead_recipes.grading.equivalence.units import is_unit
from lead_recipes.grading.extraction.numbers import rational

DEFAULT_REL_TOL = 1e-4
MIN_DIGITS = 3  # a decimal rounded to fewer significant digits (`3.1` for pi, `0.67` for 2/3) approximates nothing
# A precision is ("rel", tolerance) — the default — or ("places", d): d decimal places (negative: tens, hundreds),
# or ("sig", n): n significant figures, or EXACT: the problem asks for an exact form, no decimal approximates.
# Plain tuples: they travel to the workers and key the verdict cache.
Precision = tuple[str, float]
EXACT: Precision = ("exact", 0.0)

_WORD_NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()
_COUNT = r"(\d{1,2}|" + "|".join(_WORD_NUMBERS) + r")"
_PLACE_WORDS = {
    "tenth": 1,
    "hundredth": 2,
    "thousandth": 3,
    "ten-thousandth": 4,
    "ten thousandth": 4,
    "hundred-thousandth": 5,
    "hundred thousandth": 5,
    "millionth": 6,
    "whole number": 0,
    "number": 0,  # after "whole"
    "integer": 0,
    "one": 0,
    "unit": 0,
    "ten": -1,
    "hundred": -2,
    "thousand": -3,
    "ten thousand": -4,
    "ten-thousand": -4,
    "hundred thousand": -5,
    "million": -6,
    "cent": 2,  # of a dollar
}
_NEAREST_RE = re.compile(r"(?i)\bto\s+the\s+nearest\s+([a-z]+(?:-[a-z]+)?(?:\s+[a-z]+(?:-[a-z]+)?){0,3})")
_PLACES_RE = re.compile(rf"(?i)\b{_COUNT}\s+decimal\s+(?:places?|digits?)\b|\b{_COUNT}\s*d\.\s?p\.")
_ORDINAL_PLACE_RE = re.compile(r"(?i)\bto\s+the\s+(first|second|third|fourth|fifth|sixth)\s+decimal\s+place\b")
_SIG_RE = re.compile(rf"(?i)\b{_COUNT}\s+(?:significant\s+(?:figures?|digits?)|sig\.?\s*figs?\b|s\.\s?f\.)")
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6}
# A problem asking for one of these wants the exact value: `0.33` is no common fraction, `2.83` no radical form.
_EXACT_FORM_RE = re.compile(
    r"(?i)\b(?:common\s+fraction|(?:simplest|lowest|reduced)\s+(?:radical\s+)?(?:form|terms)|radical\s+form|"
    r"exact\s+(?:value|form|answer)|mixed\s+number|improper\s+fraction|as\s+a\s+(?:reduced\s+)?fraction|"
    r"in\s+terms\s+of\s+(?:\$\s*)?(?:\\pi\b|π|pi\b))"
)
# After "to the nearest X" these mean X is no rounding unit: "the nearest integer to $x$", "the nearest point on".
_NOT_ROUNDING = {"to", "from", "on", "in", "that", "which", "with", "point", "points", "vertex", "side"}


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _WORD_NUMBERS.index(word.lower())


def _unit_words(words: list[str]) -> bool:
    """True when `words` start with a unit ("dollar", "square centimeter", "percent")."""
    return bool(words) and (
        words[0] in ("percent", "person", "people") or is_unit(" ".join(words[:2])) or is_unit(words[0])
    )


def _nearest(phrase: str) -> Precision | None:
    """The precision "to the nearest <phrase>" states, or None when the phrase names no place value or unit."""
    words = phrase.lower().split()
    if words[0] == "whole":
        words = words[1:] or ["one"]
    for n in (2, 1):
        place = " ".join(words[:n])
        if len(words) >= n and (place in _PLACE_WORDS or place.endswith("s") and place[:-1] in _PLACE_WORDS):
            rest = words[n:]
            if rest and rest[0] in _NOT_ROUNDING:
                return None  # "the nearest integer to $x$"
            return ("places", _PLACE_WORDS.get(place, _PLACE_WORDS.get(place[:-1])))
    if _unit_words(words) and not (len(words) > 1 and words[1] in _NOT_ROUNDING):
        return ("places", 0)  # the nearest dollar, degree, meter, square centimeter, percent
    return None


@functools.lru_cache(maxsize=4096)
def stated_precision(problem: str | None) -> Precision | None:
    """The precision `problem` asks the answer to be given to: EXACT when it asks for an exact form (a common
    fraction, simplest radical form, in terms of pi, …), whatever else it states; else None when it states none or
    several different ones (a problem about rounding, or one that rounds an intermediate value, states several)."""
    if not problem or not isinstance(problem, str):
        return None
    if _EXACT_FORM_RE.search(problem):
        return EXACT
    found = {p for p in (_nearest(m.group(1)) for m in _NEAREST_RE.finditer(problem)) if p is not None}
    found.update(("places", _count(m.group(1) or m.group(2))) for m in _PLACES_RE.finditer(problem))
    found.update(("places", _ORDINALS[m.group(1).lower()]) for m in _ORDINAL_PLACE_RE.finditer(problem))
    found.update(("sig", _count(m.group(1))) for m in _SIG_RE.finditer(problem))
    return next(iter(found)) if len(found) == 1 else None


def written_places(s: str) -> int | None:
    """The last decimal place a number literal states, trailing zeros aside (`3.14` → 2, `3.140` → 2, `1230` → -1,
    `5` → 0); None for a fraction (exact)."""
    v = rational(s.strip())
    if v is None or "/" in s or "frac" in s:
        return None
    k = 0
    while (v * Fraction(10) ** k).denominator != 1:
        k += 1
    while v and k > -18 and (v * Fraction(10) ** (k - 1)).denominator == 1:
        k -= 1
    return k


def literal_places(s: str, precision: Precision) -> int | None:
    """The decimal places literal `s` writes as `precision` reads them: under the default rule every digit written
    (`0.1430` claims four places: it is not 1/7 = 0.142857…), under a stated precision trailing zeros aside
    (`written_places`: `0.330` is 0.33 to the nearest hundredth); None for a fraction (exact)."""
    if precision[0] != "rel":
        return written_places(s)
    s = s.strip()
    return None if "/" in s or "frac" in s else len(s.partition(".")[2])


def _round(x: Fraction, places: int) -> Fraction:
    """`x` rounded half away from zero to `places` decimal places (negative: to tens, hundreds, …)."""
    scale = Fraction(10) ** places
    q = abs(x) * scale
    r = math.floor(q + Fraction(1, 2))
    return (r if x >= 0 else -r) / scale


def _terminates(q: Fraction) -> bool:
    d = q.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def values_verdict(
    g: Fraction, g_places: int | None, p: Fraction, p_places: int | None, precision: Precision, irrational: bool = False
) -> bool | None:
    """Verdict for gold value `g` and answer value `p`, each written to `…_places` decimal places (None: exact).
    ("rel", t): a decimal against a value whose expansion does not end is equal when it is that value rounded to
    the places it writes (at least `MIN_DIGITS` significant digits: `0.667` for 2/3, not `0.67`) or within relative
    precision t (a truncation: `0.6666`); None otherwise (exact paths decide). EXACT: only the same value.
    ("places", d) / ("sig", n): equal
    when both round to the same value at d places
    (n significant figures of the gold), half away from zero; an answer written to more places is right only where
    the gold is known that far and agrees (`0.333` is `\\frac13` to 2 places, `0.3349` is not; `3.1416` is not
    `3.14` to 2 places: its extra digits cannot be checked, as `6287000` is not `6290000` to the nearest ten thousand).
    `irrational`: the exact side is an irrational constant given to 30 digits (the workers), never terminating."""
    if g == p:
        return True
    kind, amount = precision
    if kind == "exact":
        return False  # two different values; a decimal for an exact form is never its approximation
    if kind == "rel":
        if (g_places is None) == (p_places is None):
            return None
        exact, approx, places = (p, g, g_places) if g_places is not None else (g, p, p_places)
        if places <= 0 or not irrational and _terminates(exact):
            return None  # an integer is not an approximation; a terminating value is exact
        # The digits written: `0.67` states 2/3 to two places. A truncation within `amount` is right too.
        written = _round(exact, places) == approx and places + math.floor(math.log10(abs(approx))) >= MIN_DIGITS - 1
        return written or abs(g - p) <= Fraction(repr(amount)) * max(abs(g), abs(p))  # repr: 1e-4 is 1/10000
    if kind == "sig":
        if g == 0:
            return None
        places = int(amount) - 1 - math.floor(math.log10(abs(g)))
    else:
        places = int(amount)
    if g_places is None and p_places is None:
        return False  # two different exact values
    if p_places is not None and p_places > places:  # digits beyond the stated place: right only if checkable
        return (g_places is None or g_places >= p_places) and _round(g, p_places) == p
    return _round(g, places) == _round(p, places)


_PERCENT_RE = re.compile(r"\\?%")


def number_verdict(gold: str, pred: str, precision: Precision) -> bool | None:
    """`values_verdict` for two number literals (integers, decimals, fractions); None when either is no literal."""
    if precision[0] == "rel" and ("." in gold) == ("." in pred):
        return None  # the common case (two integers): no decimal against an exact value
    if len(gold) > 40 or len(pred) > 40 or _PERCENT_RE.search(gold) or _PERCENT_RE.search(pred):
        return None
    g, p = rational(gold), rational(pred)
    if g is None or p is None:
        return None
    return values_verdict(g, literal_places(gold, precision), p, literal_places(pred, precision), precision)
