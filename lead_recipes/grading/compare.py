"""The in-process half of comparing an extracted answer with its gold: the rewrites of answer forms, in order, and
the verdicts that need no math-verify.

What it does: `prepare(gold, pred, rel_tol)` → (pair for math-verify, verdict or None):
1. units and words (`lead_recipes.grading.units.align_units`): `10 weeks` vs `10` → `10`, `10`; two different known
   units (`12 cm` vs `12 mm`) → verdict False;
2. number forms (`lead_recipes.grading.numbers.align_numbers`): mixed numbers, thousands separators, decimal commas;
3. the other forms (`lead_recipes.grading.forms.align_forms`, with `lead_recipes.grading.matrices`): labelled
   lists, renamed variables, intervals, vectors and matrices, degrees–minutes, spelling;
4. a decimal against a fraction whose expansion does not end, at `rel_tol` (`numbers.approx_verdict`), then the
   exact paths (`lead_recipes.grading.answers.fast_verdict`).
Both the Grader (`lead_recipes.grading.grader`) and the tests call this one function, so they cannot drift apart.

What it does not do: no math-verify, no sympy, no processes, no cache; `explosive` answers are the Grader's.
"""
from __future__ import annotations

from lead_recipes.grading.answers import fast_verdict
from lead_recipes.grading.forms import align_forms
from lead_recipes.grading.numbers import DEFAULT_REL_TOL, PLAIN_RE, align_numbers, approx_verdict
from lead_recipes.grading.units import align_units


def prepare(gold: str, pred: str, rel_tol: float = DEFAULT_REL_TOL) -> tuple[tuple[str, str], bool | None]:
    """((gold, pred) rewritten for math-verify, a verdict known without it or None); see the module docstring."""
    if gold == pred or (PLAIN_RE.fullmatch(gold) and PLAIN_RE.fullmatch(pred)):
        return (gold, pred), fast_verdict(gold, pred)     # most rewards: no rewrite can apply
    units = align_units(gold, pred)
    if units is None:
        return (gold, pred), False
    key = align_forms(*align_numbers(*units))
    verdict = approx_verdict(*key, rel_tol)
    return key, fast_verdict(*key) if verdict is None else verdict
