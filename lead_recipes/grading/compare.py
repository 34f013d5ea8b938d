"""The in-process half of comparing an extracted answer with its gold: `prepare` applies the answer-form rewrites in
order (units, number forms, the other forms) and returns the verdicts that need no math-verify. The Grader and the
tests call this one function, so they cannot drift apart. No math-verify, sympy or cache.
See docs/grading.md#answer-forms.
"""

from __future__ import annotations

from lead_recipes.grading.answers import fast_verdict
from lead_recipes.grading.forms import align_forms
from lead_recipes.grading.numbers import DEFAULT_REL_TOL, PLAIN_RE, align_numbers, approx_verdict
from lead_recipes.grading.units import align_units


def prepare(gold: str, pred: str, rel_tol: float = DEFAULT_REL_TOL) -> tuple[tuple[str, str], bool | None]:
    """((gold, pred) rewritten for math-verify, a verdict known without it or None); see the module docstring."""
    if gold == pred or (PLAIN_RE.fullmatch(gold) and PLAIN_RE.fullmatch(pred)):
        return (gold, pred), fast_verdict(gold, pred)  # most rewards: no rewrite can apply
    units = align_units(gold, pred)
    if units is None:
        return (gold, pred), False
    key = align_forms(*align_numbers(*units))
    verdict = approx_verdict(*key, rel_tol)
    return key, fast_verdict(*key) if verdict is None else verdict
