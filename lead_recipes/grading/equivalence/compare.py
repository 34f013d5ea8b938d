"""The in-process half of comparing an extracted answer with its gold: `prepare` applies the answer-form rewrites in
order (units, number forms, the other forms) and returns the verdicts that need no math-verify (exact paths, a
multiset gold, two numbers under the precision). The Grader and the
tests call this one function, so they cannot drift apart. No math-verify, sympy or cache.
See docs/grading.md#answer-forms.
"""

from __future__ import annotations

import re

from lead_recipes.grading.equivalence.forms import align_forms
from lead_recipes.grading.equivalence.precision import DEFAULT_REL_TOL, Precision, number_verdict
from lead_recipes.grading.equivalence.units import align_units
from lead_recipes.grading.extraction.answers import fast_verdict
from lead_recipes.grading.extraction.brackets import is_tuple, top_items
from lead_recipes.grading.extraction.numbers import PLAIN_RE, align_numbers, rational
from lead_recipes.grading.extraction.pairing import is_list

_SET_RE = re.compile(r"\s*(?:\\left)?\\\{(.*?)(?:\\right)?\\\}\s*", re.S)
_SAME_LABEL_RE = re.compile(r"\s*([A-Za-z])\s*=(?!=)\s*(.+)", re.S)


def _items(s: str) -> list[str]:
    """Top-level items of a list or set, one label shared by every item dropped (`x = 1, x = 2` → [`1`, `2`])."""
    m = _SET_RE.fullmatch(s)
    items = top_items(m.group(1) if m else s)
    labelled = [_SAME_LABEL_RE.fullmatch(x) for x in items]
    if all(labelled) and len({x.group(1) for x in labelled}) == 1:
        items = [x.group(2).strip() for x in labelled]
    return [re.sub(r"\s+", "", x) for x in items]


def multiset_verdict(gold: str, pred: str) -> bool | None:
    """A bare gold list that repeats a value (`1, 1, 2`: roots counted with multiplicity) is a multiset, which
    math-verify would compare as a set: an answer with another number of items is wrong, and lists of plain numbers
    compare as sorted values (`1, 2, 2` is wrong). None when the gold is no such list or math-verify decides."""
    if len(gold) > 400 or len(pred) > 400 or is_tuple(gold) or _SET_RE.fullmatch(gold) or not is_list(gold):
        return None
    gi = _items(gold)
    if len(gi) < 2 or len(set(gi)) == len(gi):
        return None
    pi = _items(pred)
    if len(pi) != len(gi):
        return False
    gv, pv = [rational(x) for x in gi], [rational(x) for x in pi]
    if None in gv or None in pv:
        return None
    return sorted(gv) == sorted(pv)


def prepare(
    gold: str, pred: str, precision: Precision = ("rel", DEFAULT_REL_TOL)
) -> tuple[tuple[str, str], bool | None]:
    """((gold, pred) rewritten for math-verify, a verdict known without it or None); see the module docstring.
    `precision`: `lead_recipes.grading.equivalence.precision.Precision` (stated by the problem, else the relative
    default)."""
    if gold == pred or (PLAIN_RE.fullmatch(gold) and PLAIN_RE.fullmatch(pred)):
        verdict = number_verdict(gold, pred, precision) if gold != pred else None
        return (gold, pred), fast_verdict(gold, pred) if verdict is None else verdict  # most rewards
    verdict = multiset_verdict(gold, pred)
    if verdict is not None:
        return (gold, pred), verdict
    units = align_units(gold, pred)
    if units is None:
        return (gold, pred), False
    key = align_forms(*align_numbers(*units))
    verdict = number_verdict(*key, precision)
    return key, fast_verdict(*key) if verdict is None else verdict
