"""Units and words after a number (`align_units`): a unit on one side only is dropped, two different known units
make the pair wrong (no conversion), the same unit spelled differently or count nouns are dropped, and words that
change the value make it wrong. It never decides that two values are equal. See docs/grading.md#answer-forms.
"""

from __future__ import annotations

import re

from lead_recipes.grading.extraction.brackets import top_items

_MAX_CHARS = 200
_GROUPS = {
    "mm": "mm millimeter millimeters millimetre millimetres",
    "cm": "cm centimeter centimeters centimetre centimetres",
    "m": "m meter meters metre metres",
    "km": "km kilometer kilometers kilometre kilometres",
    "in": "in in. inch inches",
    "ft": "ft ft. foot feet",
    "yd": "yd yard yards",
    "mi": "mi mile miles",
    "s": "s sec secs second seconds",
    "min": "min mins minute minutes",
    "h": "h hr hrs hour hours",
    "day": "day days",
    "week": "wk wks week weeks",
    "month": "month months",
    "year": "yr yrs year years",
    "g": "g gram grams",
    "kg": "kg kilogram kilograms",
    "mg": "mg milligram milligrams",
    "lb": "lb lbs pound pounds",
    "oz": "oz ounce ounces",
    "l": "l liter liters litre litres",
    "ml": "ml milliliter milliliters millilitre millilitres",
    "dollar": "dollar dollars usd",
    "cent": "cent cents",
    "euro": "euro euros",
    "gbp": "gbp sterling",  # `£`: not `pounds`, the weight
    "yen": "yen jpy",
    "deg": "deg degree degrees",
    "rad": "rad radian radians",
    "unit": "unit units",
    "mi/h": "mph",  # a rate written `a/b` or `a per b` is composed from the units above
    "km/h": "kph kmh",
    "%": "percent percents pct",
    "degC": "celsius",
    "degF": "fahrenheit",
}
_UNITS = {w: canon for canon, words in _GROUPS.items() for w in words.split()}
_NOT_WORDS = {
    "pi",
    "e",
    "i",
    "sin",
    "cos",
    "tan",
    "cot",
    "csc",
    "log",
    "ln",
    "exp",
    "sqrt",
    "mod",
    "arcsin",
    "arccos",
    "arctan",
    "and",
    "or",
    "for",
    "if",
    "where",
    "when",
    "with",
    "to",
    "by",
}
# Words that may follow a count and be dropped though they are no unit ("5 students", "5 such numbers").
_COUNT_NOUNS = set(
    """student students people person persons child children boy boys girl girls man men woman women
    way ways number numbers integer integers solution solutions value values root roots digit digits term terms
    item items object objects element elements point points pair pairs triple triples set sets subset subsets
    outcome outcomes case cases""".split()
)
_COUNT_ADJECTIVES = {
    "such",
    "distinct",
    "different",
    "possible",
    "total",
    "positive",
    "negative",
    "real",
    "ordered",
    "unordered",
    "valid",
}
# Words after a number that change its value or make it a bound or a choice: the value is then not the number
# ("5 million", "3 squared", "2 times pi", "3 or more", "4 less than x").
_REFUSE_WORDS = {
    "times",
    "over",
    "plus",
    "minus",
    "less",
    "more",
    "fewer",
    "greater",
    "than",
    "squared",
    "cubed",
    "factorial",
    "half",
    "halves",
    "third",
    "thirds",
    "quarter",
    "quarters",
    "fourths",
    "fifths",
    "dozen",
    "dozens",
    "score",
    "hundred",
    "hundreds",
    "thousand",
    "thousands",
    "million",
    "millions",
    "billion",
    "billions",
    "trillion",
    "or",
    "and",
    "nor",
    "divided",
    "multiplied",
    "power",
    "least",
    "most",
    "not",
}
_TEXT_RE = re.compile(
    r"(.*?\S)\s*(?:\\[,;:! ]|~)*\s*\\(?:text|mathrm|mbox|textrm|rm)\s*\{\s*([^{}]*?)\s*\}"
    r"(\s*\^\s*\{?\s*[23]\s*\}?)?\s*\.?",
    re.S,
)
_WORDS_RE = re.compile(
    r"(.*?[\d}])(\s*)([A-Za-z][A-Za-z./]*(?:\s+[A-Za-z][A-Za-z./]*){0,3})"
    r"(\s*\^\s*\{?\s*[23]\s*\}?)?\s*\.?",
    re.S,
)
_MANY_WORDS_RE = re.compile(
    r"(.*?[\d}])(\s*)([A-Za-z][A-Za-z./]*(?:\s+[A-Za-z][A-Za-z./]*)*)"
    r"(\s*\^\s*\{?\s*[23]\s*\}?)?\s*\.?",
    re.S,
)
# Spellings models use for a unit after a number: `\mathrm{~cm}` (a tie inside the box), `\mathrm{km}/\mathrm{h}` (one
# box per part), `\text{10 weeks}` (the number in the box too), `8''` / `8\text{''}` (inches).
_TIE_RE = re.compile(r"(\\(?:text|mathrm|textrm|mbox|rm)\s*\{)\s*(?:~|\\[,;: !])+")
_SPLIT_BOX_RE = re.compile(r"\}\s*/\s*\\(?:text|mathrm|textrm|mbox|rm)\s*\{")
_NUMBER_IN_BOX_RE = re.compile(r"\\(?:text|mathrm|textrm|mbox)\{\s*(-?\d+(?:\.\d+)?)\s+([A-Za-z][^{}]*)\}")
_INCHES_RE = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:\\text\{\s*''\s*\}|''|\"|″|\^\s*\{?\s*\\prime\s*\\prime\s*\}?)")
# `\$50` (dollars), `20¢` (cents), `45°` / `45 °C` / `45^\circ\mathrm{C}` (degrees), `\mathrm{cm^2}` (the power in
# the box): written as the number and a unit box the patterns below read.
_CURRENCY_RE = re.compile(r"\\?\$\s*(-?\d[\d,]*(?:\.\d+)?)")
# `1,204.50€`, `€5`, `£3`, `¥100`: the other currency signs, before or after the number.
_SIGN_RE = re.compile(r"([€£¥])\s*(-?\d[\d,]*(?:\.\d+)?)|(-?\d[\d,]*(?:\.\d+)?)\s*([€£¥])")
_SIGN_UNITS = {"€": "euros", "£": "sterling", "¥": "yen"}
_CENT_RE = re.compile(r"(.*?\d)\s*(?:\\text\{\s*¢\s*\}|¢)")
_TEMPERATURE_RE = re.compile(
    r"(?:\^\s*\{?\s*\\circ\s*\}?|°)\s*(?:\\(?:text|mathrm|textrm|rm)\s*\{\s*([CF])\s*\}|([CF])(?![A-Za-z]))"
)
_POWER_IN_BOX_RE = re.compile(
    r"(\\(?:text|mathrm|textrm|mbox|rm)\s*\{[^{}^]*?)\s*\^\s*(?:\{\s*([23])\s*\}|([23]))\s*\}"
)
_PER_RE = re.compile(r"(?i)\s+per\s+(?=[a-z])|\s*/\s*")
_SQUARE_RE = re.compile(r"(?i)\A(?:square|sq\.?)\s+(.+)\Z")
_CUBIC_RE = re.compile(r"(?i)\A(?:cubic|cu\.?)\s+(.+)\Z")


def _respell(s: str) -> str:
    """`s` with the unit spellings above written the one way the patterns below read."""
    s = _SPLIT_BOX_RE.sub("/", _TIE_RE.sub(r"\1 ", s.strip()))
    if "^" in s:
        s = _POWER_IN_BOX_RE.sub(lambda m: f"{m.group(1)}}}^{m.group(2) or m.group(3)}", s)
    if "circ" in s or "°" in s:
        s = _TEMPERATURE_RE.sub(
            lambda m: "\\text{ " + ("celsius" if (m.group(1) or m.group(2)) == "C" else "fahrenheit") + "}", s
        ).replace("°", "^\\circ")
    m = (_CURRENCY_RE.fullmatch(s) if "$" in s else None) or (_CENT_RE.fullmatch(s) if "¢" in s else None)
    if m is not None:
        return f"{m.group(1)}\\text{{ {'dollars' if m.re is _CURRENCY_RE else 'cents'}}}"
    m = _SIGN_RE.fullmatch(s) if re.search("[€£¥]", s) else None
    if m is not None:
        return f"{m.group(2) or m.group(3)}\\text{{ {_SIGN_UNITS[m.group(1) or m.group(4)]}}}"
    m = _NUMBER_IN_BOX_RE.fullmatch(s) or _INCHES_RE.fullmatch(s)
    if m is not None:
        return f"{m.group(1)}\\text{{ {m.group(2) if m.re is _NUMBER_IN_BOX_RE else 'in'}}}"
    return s


def _plain_value(s: str) -> bool:
    """A number or numeric expression: has a digit, no letter outside a LaTeX command."""
    return bool(re.search(r"\d", s)) and re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", s)) is None


def _canonical(words: str, power: str | None) -> str | None:
    """The unit `words` stand for (`square centimeters` → `cm^2`), or None when they are not a known unit."""
    w = _PER_RE.sub("/", " ".join(words.lower().split()))  # `km / h`, `miles per hour`
    exp = re.sub(r"\D", "", power or "")
    for rx, e in ((_SQUARE_RE, "2"), (_CUBIC_RE, "3")):
        m = rx.match(w)
        if m:
            w, exp = m.group(1), e
    canon = _UNITS.get(w) or _UNITS.get(w.rstrip("."))
    parts = w.split("/")
    if canon is None and len(parts) == 2 and all(x.strip(".") in _UNITS for x in parts):
        canon = "/".join(_UNITS[x.strip(".")] for x in parts)
    return None if canon is None else canon + (f"^{exp}" if exp else "")


def is_unit(words: str) -> bool:
    """True when `words` name a known unit (`dollar`, `square centimeters`, `km/h`)."""
    return _canonical(words, None) is not None


def _words_kind(words: str, power: str | None, spaced: bool = True) -> str | None:
    """ "unit" / "count" when `words` may be dropped (a known unit; count nouns), "refuse" when a word changes the
    value (`_REFUSE_WORDS`) or is a lone letter that is not a known unit, else None (unknown words: kept)."""
    ws = [w.rstrip(".") for w in words.lower().replace("/", " / ").split()]
    if _canonical(words, power) is not None:
        return "unit"
    if any(w in _REFUSE_WORDS for w in ws) or (spaced or len(ws) > 1) and any(len(w) == 1 and w != "/" for w in ws):
        return "refuse"
    nouns = [w for w in ws if w not in _COUNT_ADJECTIVES]
    if nouns and all(w in _COUNT_NOUNS for w in nouns) and not power:
        return "count"
    return None


def refused_words(s: str) -> bool:
    """True when `s` is a plain value followed by words that change it (`5 million`, `3\\text{ or more}`)."""
    if len(s) > _MAX_CHARS:  # units follow short answers; the patterns are not for long text
        return False
    s = _respell(s)
    m = _TEXT_RE.fullmatch(s)
    if m is not None and _plain_value(m.group(1)):
        return _words_kind(m.group(2), m.group(3)) == "refuse" or not re.fullmatch(r"[A-Za-z][A-Za-z ./]*", m.group(2))
    m = _WORDS_RE.fullmatch(s) or _MANY_WORDS_RE.fullmatch(s)
    return (
        m is not None and _plain_value(m.group(1)) and _words_kind(m.group(3), m.group(4), bool(m.group(2))) == "refuse"
    )


def split_unit(s: str, letter: bool = False) -> tuple[str, str | None, bool] | None:
    """(value, canonical unit or None, is_unit) when `s` is a plain value followed by a unit or words, else None; a
    single known letter after a space (`5 g`) counts only with `letter`."""
    if len(s) > _MAX_CHARS:
        return None
    s = _respell(s)
    m = _TEXT_RE.fullmatch(s)
    if m is not None and _plain_value(m.group(1)) and re.fullmatch(r"[A-Za-z][A-Za-z ./]*", m.group(2)):
        if _words_kind(m.group(2), m.group(3)) not in ("unit", "count"):
            return None  # `5\text{ million}`, `3\text{ or more}`: not a unit to drop
        canon = _canonical(m.group(2), m.group(3))
        return m.group(1).strip(), canon, canon is not None
    m = _WORDS_RE.fullmatch(s)
    if m is None or not _plain_value(m.group(1)):
        return None
    words = m.group(3)
    canon = _canonical(words, m.group(4))
    first = words.split()[0].lower().rstrip(".")
    if (
        first in _NOT_WORDS
        or (canon is None and (len(first) < 3 or not m.group(2)))
        or (len(first) < 2 and not (letter and canon and m.group(2)))
    ):
        return None  # `2 pi`, `5m`, `3x`: not a unit
    if _words_kind(words, m.group(4)) not in ("unit", "count"):
        return None  # `5 million`, `3 squared`, `2 times pi`: the words change the value
    return m.group(1).strip(), canon, canon is not None


_UNIT_BOX = r"\\(?:text|mathrm|mbox|textrm|rm)\s*\{[^{}]*[A-Za-z][^{}]*\}"
_COMPOUND_RE = re.compile(
    rf"\s*-?\d[\d.,]*\s*(?:\\[,;:! ]|~)*\s*{_UNIT_BOX}(?:\s*\^\s*\{{?\s*[23]\s*\}}?)?+(.*\d.*)", re.S
)
_ITEM_LABEL_RE = re.compile(r"(\s*[A-Za-z](?:_\{?\w+\}?)?\s*=(?!=)\s*)(.+)", re.S)


def align_units(gold: str, pred: str) -> tuple[str, str] | None:
    """(gold, pred) with units and words dropped (see the module docstring), unchanged when neither side has one;
    None when both carry known units that differ. Lists of as many items are aligned item by item (labels kept)."""
    if refused_words(gold) or refused_words(pred):
        return None  # `5 million` vs `5`: equal strings never get here (compare.prepare)
    listed = len(gold) + len(pred) <= 5 * _MAX_CHARS and all(re.search(r",|;|\\text\{\s*and", x) for x in (gold, pred))
    gi, pi = (top_items(gold), top_items(pred)) if listed else ([], [])
    short = all(len(x) <= _MAX_CHARS for x in gi + pi)
    if 2 <= len(gi) == len(pi) <= 50 and short and any(_TEXT_RE.search(x) or split_unit(x) for x in gi + pi):
        out: list[tuple[str, str]] = []
        for a, b in zip(gi, pi):
            la, lb = _ITEM_LABEL_RE.fullmatch(a), _ITEM_LABEL_RE.fullmatch(b)
            pair = _align_one(la.group(2) if la else a, lb.group(2) if lb else b)
            if pair is None:
                return None
            out.append(((la.group(1) if la else "") + pair[0], (lb.group(1) if lb else "") + pair[1]))
        return ", ".join(a for a, _ in out), ", ".join(b for _, b in out)
    return _align_one(gold, pred)


def _align_one(gold: str, pred: str) -> tuple[str, str] | None:
    """`align_units` for one value on each side. A value that goes on after its unit (`2 \\text{ h } 30 \\text{ min}`,
    `2 \\text{ cm} + 3 \\text{ cm}`; math-verify reads only what comes before the unit) equals nothing but itself."""
    if gold != pred and any(len(x) <= _MAX_CHARS and _COMPOUND_RE.fullmatch(_respell(x)) for x in (gold, pred)):
        return None
    g, p = split_unit(gold), split_unit(pred)
    if g is not None and g[2] and p is None:  # `5 kg` vs `5 g`: next to a unit, a lone letter is one too
        p = split_unit(pred, letter=True)
    elif p is not None and p[2] and g is None:
        g = split_unit(gold, letter=True)
    gold, pred = gold.replace("°", "^\\circ"), pred.replace("°", "^\\circ")  # `45°`: math-verify reads `^\\circ`
    if g is None and p is None:
        return gold, pred
    if g is not None and p is not None and g[2] and p[2] and g[1] != p[1]:
        return None
    return (g[0] if g else gold), (p[0] if p else pred)
