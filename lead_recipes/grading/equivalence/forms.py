"""Answer forms a careful human grader accepts and math-verify 0.9 does not: `align_forms` rewrites a (gold, answer)
pair into forms math-verify compares correctly, each rewrite only when the two sides are different forms of the same
kind. Values are moved verbatim, never parsed or evaluated, so a wrong value stays wrong; regular expressions and
brace matching only, and math-verify decides. See docs/grading.md#answer-forms for each form.
"""

from __future__ import annotations

import re
from fractions import Fraction

from lead_recipes.grading.equivalence.matrices import align_vectors
from lead_recipes.grading.extraction.brackets import COMMA_RE, is_tuple, top_split

_MAX_CHARS = 600  # longer answers are left as they are (rewrites are for short final answers)
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")

_OR_RE = re.compile(r"\\text\{\s*or\s*\}|\\(?:lor|vee|cup)\b|\bor\b")
_VAR = r"(?:[A-Za-z]|\\(?:alpha|beta|gamma|theta|lambda|mu|phi|varphi|omega|tau|rho|sigma))(?:_\{?\w+\}?)?"
_VAR_RE = re.compile(_VAR)
_LABEL_RE = re.compile(rf"\s*({_VAR}(?:\s*\([^()=]{{1,40}}\))?)\s*=(?!=)\s*(.+)", re.S)
_SEG_RE = re.compile(r"\s*[A-Z]{2,3}\s*|" + _VAR)  # a segment `AB` or a variable
_SEG_LABEL_RE = re.compile(r"\s*([A-Z]{2,3})\s*=(?!=)\s*(.+)", re.S)
_TUPLE_EQ_RE = re.compile(r"\s*\(([^()=]+)\)\s*=(?!=)\s*\(([^()=]+)\)\s*")
_DEPENDENT_RE = re.compile(r"\s*([A-Za-z])\s*=(?!=)\s*(.+)", re.S)
_FUNC_RE = re.compile(r"\s*([A-Za-z](?:_\{?\w+\}?)?)\s*\(\s*([A-Za-z])\s*\)\s*=(?!=)\s*(.+)", re.S)


def _unwrap_text_list(s: str) -> str:
    """`\\text{B,C}` / `\\textbf{B, C}` / `\\mathrm{B,C}` → `B, C` (a comma list of short items in one text box)."""
    m = re.fullmatch(r"\\(?:text|textbf|mathrm|textrm|mbox)\{([^{}]{1,200})\}", s.strip())
    if not m or "," not in m.group(1):
        return s
    items = [x.strip() for x in m.group(1).split(",")]
    if all(re.fullmatch(r"\(?[A-Za-z0-9]{1,3}\)?", x) for x in items):
        return ", ".join(items)
    return s


# ------------------------------------------------------------------------------------------------ labels, functions
def _labelled(s: str) -> list[tuple[str, str]] | None:
    """[(label, value)] when `s` is a list of ≥ 2 items that all carry a label (`p=3`, `T(4)=9`, segment `AB=5`), or
    a labelled tuple `(x, y) = (2, 1)`, else None."""
    m = _TUPLE_EQ_RE.fullmatch(s)
    if m is not None:
        labels, values = top_split(m.group(1), COMMA_RE), top_split(m.group(2), COMMA_RE)
        if len(labels) >= 2 and len(labels) == len(values) and all(_SEG_RE.fullmatch(x) for x in labels):
            return [(re.sub(r"\s+", "", k), v.strip()) for k, v in zip(labels, values)]
        return None
    items = top_split(s, COMMA_RE)
    if len(items) < 2:
        return None
    out = []
    for it in items:
        m = _LABEL_RE.fullmatch(it) or _SEG_LABEL_RE.fullmatch(it)
        if m is None or "=" in m.group(2):
            return None
        out.append((re.sub(r"\s+", "", m.group(1)), m.group(2).strip()))
    return out


def _bare_list(s: str) -> list[str] | None:
    """The items of a list with no `=` in any item (`9, 2` or `(9, 2)`), else None."""
    body = s.strip()
    if is_tuple(body):
        body = re.sub(r"\\(?:left|right)(?=[()])", "", body)[1:-1]
    items = top_split(body, COMMA_RE)
    if len(items) < 2 or any(not x or "=" in x for x in items):
        return None
    return items


def _canonical(lab: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Single-letter labels (`y=1, x=2`, `x_2, x_1`) and numeric function arguments (`T(5), T(4)`) in their
    canonical order x, y, z / a, b, c / x_1, x_2; other labels (`AB`, `BC`) as written. The bare list of the other
    side is read in that order, so a labelled side written out of order is compared by what each label means."""

    def key(k: str):
        m = re.fullmatch(r"([A-Za-z])(?:_\{?(\d+)\}?)?", k) or re.fullmatch(r"([A-Za-z])\((-?\d+)\)", k)
        return (m.group(1), int(m.group(2) or 0)) if m else None

    keys = [key(k) for k, _ in lab]
    if None in keys or len({k[0] for k in keys}) not in (1, len(keys)):
        return lab
    return [x for _, x in sorted(zip(keys, lab))]


_GROUP_RE = re.compile(r";|\\text\{\s*(?:or|and)\s*\}|\\q?quad|\bor\b")


def _solution_tuples(s: str) -> str | None:
    """`m=3, n=1; m=4, n=1` (solutions written as labelled groups with the same labels) as the tuples
    `(3, 1), (4, 1)`, values in the labels' canonical order; else None."""
    groups = [x for x in top_split(s, _GROUP_RE) if x.strip()]
    labs = [_labelled(x) for x in groups] if len(groups) >= 2 else [None]
    if not all(labs):
        return None
    keys = {tuple(k for k, _ in _canonical(lab)) for lab in labs}
    if len(keys) != 1 or len(set(next(iter(keys)))) < 2:
        return None
    return ", ".join("(" + ", ".join(v for _, v in _canonical(lab)) + ")" for lab in labs)


_FIRST_LABEL_RE = re.compile(rf"\s*{_VAR}\s*=(?!=)\s*")


def _one_label(s: str) -> str:
    """`k=2, -5, 7` (one label naming a whole list) as the list `2, -5, 7`; anything else unchanged."""
    items = top_split(s, COMMA_RE)
    first = _FIRST_LABEL_RE.match(items[0]) if len(items) >= 2 else None
    if first is None or any("=" in x for x in items[1:]) or "=" in items[0][first.end() :]:
        return s
    return ", ".join(x.strip() for x in [items[0][first.end() :], *items[1:]])


def _align_labels(gold: str, pred: str) -> tuple[str, str] | None:
    gl, pl = _labelled(gold), _labelled(pred)
    if gl and pl:  # both labelled: values matched by label (`y=2, x=1` is `x=1, y=2`)
        gd, pd = dict(gl), dict(pl)
        if len(gd) == len(gl) and len(pd) == len(pl) and set(gd) == set(pd):
            return "(" + ", ".join(v for _, v in gl) + ")", "(" + ", ".join(pd[k] for k, _ in gl) + ")"
        return None
    for a, b, flip in ((gold, pred, False), (pred, gold, True)):
        lab = _labelled(a)
        bare = _bare_list(b) if lab else None
        if lab and bare and len(lab) == len(bare) and len({k for k, _ in lab}) == len(lab):
            ta = "(" + ", ".join(v for _, v in _canonical(lab)) + ")"
            tb = "(" + ", ".join(bare) + ")"
            return (tb, ta) if flip else (ta, tb)
    return None


_CMD_RE = re.compile(r"\\[A-Za-z]+")


def _rename(expr: str, old: str, new: str) -> str:
    """`expr` with the single-letter variable `old` renamed to `new` (letters inside command names untouched)."""
    out, i = [], 0
    for m in _CMD_RE.finditer(expr):
        out.append(re.sub(rf"(?<![A-Za-z]){old}(?![A-Za-z])", new, expr[i : m.start()]))
        out.append(m.group(0))
        i = m.end()
    out.append(re.sub(rf"(?<![A-Za-z]){old}(?![A-Za-z])", new, expr[i:]))
    return "".join(out)


def _letters(expr: str) -> set[str]:
    """Single letters used as variables in `expr` (outside command names and `\\text{}`)."""
    plain = _CMD_RE.sub(" ", re.sub(r"\\(?:text|mathrm|operatorname)\{[^{}]*\}", " ", expr))
    return set(re.findall(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])", plain))


def _align_function(gold: str, pred: str) -> tuple[str, str] | None:
    fg, fp = _FUNC_RE.fullmatch(gold), _FUNC_RE.fullmatch(pred)
    if fp is None and fg is None:
        return None
    if fg is not None and fp is not None:
        if fg.group(1) != fp.group(1):
            return None
        gvar, gbody, pvar, pbody = fg.group(2), fg.group(3), fp.group(2), fp.group(3)
    elif fp is not None:  # gold is a bare body: its one variable names the answer's
        gl = _letters(gold)
        if len(gl) != 1 or "=" in gold:
            return None
        gvar, gbody, pvar, pbody = next(iter(gl)), gold, fp.group(2), fp.group(3)
    else:
        dep = _DEPENDENT_RE.fullmatch(pred)  # `y = 5t - 1` against `g(t) = 5t - 1`: the gold names the function
        if dep is not None and dep.group(1) not in _letters(dep.group(2)):
            # `x = 2y + 1` against `f(x) = 2x + 1` is the inverse relation: the left letter must be no argument and
            # the body must use the gold's own argument, never a renamed one.
            if dep.group(1) == fg.group(2) or _letters(dep.group(2)) != {fg.group(2)}:
                return None
            pred = dep.group(2)
        pl = _letters(pred)
        if len(pl) != 1 or "=" in pred:
            return None
        gvar, gbody, pvar, pbody = fg.group(2), fg.group(3), next(iter(pl)), pred
    if "=" in gbody or "=" in pbody:
        return None
    if pvar != gvar:
        if gvar in _letters(pbody):  # the new name is taken: renaming would change the answer
            return None
        pbody = _rename(pbody, pvar, gvar)
    return gbody.strip(), pbody.strip()


# ------------------------------------------------------------------------------------------------ sets of reals
_REL_RE = re.compile(r"\\(?:leqslant|geqslant|leq|geq|le|ge|lt|gt)(?![A-Za-z])|<=|>=|≤|≥|<|>")
_REL_NAME = {
    "<": "<",
    "\\lt": "<",
    ">": ">",
    "\\gt": ">",
    "\\le": "<=",
    "\\leq": "<=",
    "\\leqslant": "<=",
    "<=": "<=",
    "≤": "<=",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\geqslant": ">=",
    ">=": ">=",
    "≥": ">=",
}
_SETBUILDER_RE = re.compile(
    rf"(?:\\left)?\\\{{\s*({_VAR})\s*(?:\\in\s*\\mathbb\{{R\}}\s*)?(?:\\mid|\\vert|\||:|\\colon)\s*(.+?)\s*(?:\\right)?\\\}}",
    re.S,
)
_IN_RE = re.compile(rf"\s*({_VAR})\s*\\in\s*(.+)", re.S)


def _chain(s: str) -> tuple[str, str] | None:
    """(variable, interval) for one inequality (chain) in one variable: `x > 2`, `-3 \\le x < 1`, `2 < m`."""
    pieces, ops, pos = [], [], 0
    for m in _REL_RE.finditer(s):
        pieces.append(s[pos : m.start()].strip())
        ops.append(_REL_NAME[m.group(0)])
        pos = m.end()
    pieces.append(s[pos:].strip())
    if not ops or len(ops) > 2 or any(not p for p in pieces):
        return None
    vars_ = [i for i, p in enumerate(pieces) if _VAR_RE.fullmatch(p)]
    if len(ops) == 2:
        if vars_ != [1] and 1 not in vars_:
            return None
        if ops[0][0] != ops[1][0]:
            return None  # `a < x > b` is not an interval
        lo, hi = (pieces[0], pieces[2]) if ops[0][0] == "<" else (pieces[2], pieces[0])
        lo_open = (ops[0] if ops[0][0] == "<" else ops[1]) in ("<", ">")
        hi_open = (ops[1] if ops[0][0] == "<" else ops[0]) in ("<", ">")
        var = pieces[1]
    else:
        if len(vars_) != 1 or vars_[0] not in (0, 1):
            return None
        var, val = pieces[vars_[0]], pieces[1 - vars_[0]]
        below = (ops[0][0] == "<") == (vars_[0] == 0)  # x < a  or  a > x
        closed = "=" in ops[0]
        lo, hi, lo_open, hi_open = ("-\\infty", val, True, not closed) if below else (val, "\\infty", not closed, True)
    if var in (lo, hi) or (_VAR_RE.fullmatch(lo) and lo == var):
        return None
    for end in (lo, hi):
        if re.search(rf"(?<![A-Za-z\\]){re.escape(var)}(?![A-Za-z])", end):
            return None  # the variable on both sides: not a plain bound
    return var, f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"


def _as_interval(s: str) -> tuple[str, str] | None:
    """(variable, interval notation) for an inequality, a union of inequalities, `x \\in S` or set-builder notation
    in one variable; None for anything else."""
    s = s.strip()
    m = _SETBUILDER_RE.fullmatch(s)
    if m is not None:
        s = m.group(2)
        var_hint = m.group(1)
    else:
        var_hint = None
    m = _IN_RE.fullmatch(s)
    if m is not None and _looks_interval(m.group(2)):
        return m.group(1), m.group(2).strip()
    parts = top_split(s, _OR_RE)
    out, var = [], var_hint
    for p in parts:
        c = _chain(p)
        if c is None or (var is not None and c[0] != var):
            return None
        var = c[0]
        out.append(c[1])
    return var, " \\cup ".join(out)


def _looks_interval(s: str) -> bool:
    """Interval notation (or a union of intervals): `(2,\\infty)`, `[-3, 1)`, `(0,4)`."""
    items = top_split(re.sub(r"\\(?:left|right)(?=[()\[\]])", "", s), re.compile(r"\\cup\b|∪"))
    return all(
        re.fullmatch(r"(?:\\left)?[(\[][^()\[\]]*,[^()\[\]]*(?:\\right)?[)\]]", x.replace(" ", ""))
        and len(top_split(x.strip()[1:-1], COMMA_RE)) == 2
        for x in items
    )


def _align_sets(gold: str, pred: str) -> tuple[str, str] | None:
    if not (_REL_RE.search(gold) or _REL_RE.search(pred) or "\\in" in gold or "\\in" in pred):
        return None
    gi, pi = _as_interval(gold), _as_interval(pred)
    if gi and pi:
        if gi[1] == gold.strip() or pi[1] == pred.strip():
            return None
        same_var = gi[0] == pi[0]
        builder = bool(_SETBUILDER_RE.fullmatch(gold.strip()) or _SETBUILDER_RE.fullmatch(pred.strip()))
        return (gi[1], pi[1]) if builder or not same_var else None
    if gi and _looks_interval(pred):
        return gi[1], pred
    if pi and _looks_interval(gold):
        return gold, pi[1]
    return None


# ------------------------------------------------------------------------------------------------ angles
_NUM = r"(\d{1,6}(?:\.\d{1,8})?)"
_DMS_RE = re.compile(
    rf"{_NUM}\s*(?:\^\s*\{{?\s*\\circ\s*\}}?|°|\\degree)\s*(?:{_NUM}\s*(?:'|′|\^\s*\{{?\s*\\prime\s*\}}?|\\prime))?\s*"
    rf"(?:{_NUM}\s*(?:''|\"|″|\^\s*\{{?\s*\\prime\s*\\prime\s*\}}?|\\prime\s*\\prime))?"
)


def _dms(s: str) -> str | None:
    """`30^\\circ 15'` / `30° 15′ 36″` → exact degrees `\\frac{p}{q}^\\circ`; None unless minutes are present."""
    m = _DMS_RE.fullmatch(s.strip())
    if m is None or m.group(2) is None:
        return None
    v = Fraction(m.group(1)) + Fraction(m.group(2)) / 60 + Fraction(m.group(3) or 0) / 3600
    body = str(v.numerator) if v.denominator == 1 else f"\\frac{{{v.numerator}}}{{{v.denominator}}}"
    return body + "^\\circ"


# ------------------------------------------------------------------------------------------------ spelling, qualifiers
_SPACING_RE = re.compile(r"\\[,;:! ]|\\(?:left|right)(?![A-Za-z])|\\(?:quad|qquad)(?![A-Za-z])|\s+")
_TEXT_NAME_RE = re.compile(r"\\(?:text|mathrm|textrm|mathit)\{([A-Za-z0-9]+)\}")
_QUALIFIER_RE = re.compile(
    r"(.*?\S)\s*,?\s*(?:\\(?:text|textrm|mbox)\{\s*)?(?:for|where)\s+"
    r"(?:any|all|every|each|some|arbitrary)\b[^=]*",
    re.S,
)


def _spelling(s: str) -> str:
    """`s` without what does not change a formula: spacing, `\\left`/`\\right`, `\\text{}` around a bare name
    (`\\text{ML}` is the segment ML), `\\dfrac`/`\\tfrac` spelled `\\frac`."""
    s = _TEXT_NAME_RE.sub(r"\1", s)
    s = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", s)
    parts = re.split(r"(\\(?:text|mathrm|textrm|mbox)\{[^{}]*\})", s)  # words in text keep one space between
    return "".join(" ".join(x.split()) if i % 2 else _SPACING_RE.sub("", x) for i, x in enumerate(parts))


def _strip_qualifier(s: str, other: str) -> str:
    """`(a, 1) for any positive integer a` → `(a, 1)` when the other side states no such qualifier."""
    if re.search(r"\b(?:for|where)\b", other):
        return s
    m = _QUALIFIER_RE.fullmatch(s)
    return m.group(1).rstrip(" ,") if m and not re.search(r"\\text\{[^}]*$", m.group(1)) else s


_BOLD_RE = re.compile(r"\\(?:mathbf|boldsymbol|bm)\{([^{}]*)\}")


def _unbold(s: str) -> str:
    """`\\mathbf{2 5}` → `25`, `\\boldsymbol{\\pi}` → `\\pi`: bold is emphasis (digits spaced inside it are one
    number, as LaTeX typesets them); a closing period of the answer goes too."""
    s = _BOLD_RE.sub(lambda m: re.sub(r"(?<=\d)\s+(?=\d)", "", m.group(1)), s)
    return re.sub(r"(?<=[\d}])\s*\.\s*\Z", "", s)


# ------------------------------------------------------------------------------------------------ entry point
def align_forms(gold: str, pred: str) -> tuple[str, str]:
    """(gold, pred) rewritten into forms math-verify compares correctly (see the module docstring); unchanged when
    no rewrite applies. Never raises."""
    if (
        len(gold) > _MAX_CHARS
        or len(pred) > _MAX_CHARS
        or gold == pred
        or (_NUMBER_RE.fullmatch(gold) and _NUMBER_RE.fullmatch(pred))
    ):
        return gold, pred  # plain numbers (most rewards) need no rewrite
    try:
        if _spelling(gold) == _spelling(pred):
            return gold, gold  # the same formula spelled differently: `ML\\perp NK`
        g, p = _unwrap_text_list(_unbold(gold)), _unwrap_text_list(_unbold(pred))
        g, p = _strip_qualifier(g, p), _strip_qualifier(p, g)
        g, p = _dms(g) or g, _dms(p) or p
        g, p = _solution_tuples(g) or g, _solution_tuples(p) or p
        g, p = _one_label(g), _one_label(p)
        for rule in (align_vectors, _align_sets, _align_labels, _align_function):
            out = rule(g, p)
            if out is not None:
                return out
        return g, p
    except Exception:  # noqa: BLE001 - a form we cannot read goes to math-verify as it is
        return gold, pred
