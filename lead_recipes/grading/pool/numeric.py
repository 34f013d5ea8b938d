"""The worker's numeric comparison, in place of math-verify's `sympy_numeric_eq` (swapped in by `installed` around
each `verify`): a tolerance only for a written decimal, by the one approximation rule of
`precision.values_verdict`, and exact equality between two exact forms (math-verify compares those at 15 digits
with `chop`, so `1 + 2^{-2020}` equals `1`). Every number math-verify compares comes through it, so scalars,
tuples, sets, intervals and matrix entries follow the same rule. See docs/grading.md#precision.
"""

from __future__ import annotations

import contextlib
import math
import re
from fractions import Fraction

from lead_recipes.grading.equivalence.precision import DEFAULT_REL_TOL, Precision, literal_places, values_verdict

# The precision of the item being graded and the places each decimal value is written to in its text (set by
# `installed`): math-verify passes no context down to its number comparison (its Float forgets the digits written),
# and a worker grades one item at a time.
CURRENT: list[Precision] = [("rel", DEFAULT_REL_TOL)]
WRITTEN: dict[Fraction, int] = {}
_ORIGINAL: list = [None]  # math-verify's own `sympy_numeric_eq`, for what our rule leaves to it
_DECIMAL_RE = re.compile(r"\d*\.\d+")


@contextlib.contextmanager
def installed(precision: Precision, text: str):
    """Within the block, math-verify's grader compares numbers with `numeric_eq` under `precision`, reading the
    places of the decimals written in `text` (it looks the name up at each call); restored after, so math-verify
    elsewhere in the process stays itself."""
    import math_verify.grader as mv

    WRITTEN.clear()
    for m in _DECIMAL_RE.finditer(text):
        v = Fraction(m.group(0))
        WRITTEN[v] = max(WRITTEN.get(v, 0), literal_places(m.group(0), precision))
    saved, CURRENT[0] = mv.sympy_numeric_eq, precision
    if saved is not numeric_eq:
        _ORIGINAL[0] = saved
    mv.sympy_numeric_eq = numeric_eq
    try:
        yield
    finally:
        mv.sympy_numeric_eq = saved


def _fraction(x) -> Fraction | None:
    """A sympy Float as the decimal it was written as (its shortest repr: `0.67`, never `0.67000000000000004`)."""
    try:
        f = float(x)
    except (TypeError, ValueError, OverflowError):
        return None
    return Fraction(repr(f)) if math.isfinite(f) else None


def _places(v: Fraction) -> int:
    """The decimal places a terminating decimal writes (`0.67` → 2, `120` → 0)."""
    k = 0
    while (v * 10**k).denominator != 1 and k < 40:
        k += 1
    return k


def _exact_value(e) -> tuple[Fraction, bool] | None:
    """(value, irrational) of an exact real number without symbols: a Rational exactly, a constant to 30 digits."""
    import sympy

    e = e.doit() if hasattr(e, "doit") else e
    if not isinstance(e, sympy.Expr) or e.free_symbols or not e.is_number or e.has(sympy.Float):
        return None
    if e.is_Rational:
        return Fraction(int(e.p), int(e.q)), False
    try:
        v = complex(sympy.N(e, 30))
    except (TypeError, ValueError, ArithmeticError, AttributeError):
        return None
    if abs(v.imag) > 1e-12 or not math.isfinite(v.real):
        return None
    return Fraction(str(sympy.N(e, 30))), True


def _decimal_vs_exact(dec, other) -> bool | None:
    """A written decimal against an exact number, by the item's precision; None when `other` is no exact number."""
    d = _fraction(dec)
    exact = _exact_value(other)
    if d is None or exact is None:
        return None
    value, irrational = exact
    verdict = values_verdict(value, None, d, WRITTEN.get(d, _places(d)), CURRENT[0], irrational)
    return value == d if verdict is None else verdict


def exact_zero(diff) -> bool | None:
    """Whether the difference of two exact forms is zero: a Rational exactly (`2^{-2020}` is not zero), a constant by
    evaluation that resolves a non-zero value; an evaluation that resolves no digit is zero, as math-verify counts
    it. None when `diff` is not a number."""
    import sympy

    try:
        d = diff.doit()
        if not isinstance(d, sympy.Expr) or d.free_symbols or not d.is_number:
            return None
        if d.is_Rational:
            return d == 0
        v = d.evalf(15)
    except Exception:  # noqa: BLE001 - sympy raises many types on odd input; math-verify decides then
        return None
    if not isinstance(v, sympy.Float):
        return None
    return v == 0 or v._prec <= 1  # `0.e-122`: no digit resolved


def numeric_eq(a, b, float_rounding: int, numeric_precision: int) -> bool:
    """math-verify's `sympy_numeric_eq` with our rule: a Float (a written decimal) against an exact number by
    `precision.values_verdict`; two exact numbers exactly; matrices entry by entry; the rest as math-verify."""
    import sympy
    from math_verify.grader import get_pct_val
    from sympy.matrices.expressions import MatrixExpr

    original = _ORIGINAL[0]
    if isinstance(a, (sympy.MatrixBase, MatrixExpr)) or isinstance(b, (sympy.MatrixBase, MatrixExpr)):
        return original(a, b, float_rounding, numeric_precision)  # entries come back through this function
    if get_pct_val(a) is not None or get_pct_val(b) is not None:
        return original(a, b, float_rounding, numeric_precision)  # 9% == 9: math-verify reads the percent
    a_float, b_float = isinstance(a, sympy.Float), isinstance(b, sympy.Float)
    if a_float != b_float:
        verdict = _decimal_vs_exact(a, b) if a_float else _decimal_vs_exact(b, a)
        if verdict is not None:
            return verdict
    elif not a_float and isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr):
        if not a.has(sympy.Float) and not b.has(sympy.Float):
            zero = exact_zero(a - b)
            if zero is not None:
                return zero
    return original(a, b, float_rounding, numeric_precision)
