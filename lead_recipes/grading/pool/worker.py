"""The worker-process side of the grader, run inside the pebble pool's spawned workers: `worker_init` (memory
limit, warm-up parse) and `worker_chunk` (math-verify `verify(gold, pred)` per item under a soft timeout, gold
parses cached; a number against a real constant under the item's precision). Top-level functions so the spawn pool
pickles them by reference; pool management, hard timeouts and retries are the parent's (`grader`). LaTeX
extraction only. See docs/grading.md#how-an-answer-is-graded.
"""

from __future__ import annotations

import collections
import math
import time
from fractions import Fraction
from typing import Any

from lead_recipes.grading.equivalence.precision import DEFAULT_REL_TOL, Precision, literal_places, values_verdict
from lead_recipes.grading.extraction.numbers import rational
from lead_recipes.grading.pool.numeric import exact_zero, installed

# Everything below runs in the worker processes (spawned: they import this module, never the caller's state).
_GOLD_CACHE: "collections.OrderedDict[str, Any]" = collections.OrderedDict()
_GOLD_CACHE_SIZE = 4096


class _ItemTimeout(BaseException):
    """Raised by the worker's SIGALRM handler; BaseException so math-verify's `except Exception` cannot eat it."""


def _on_alarm(signum, frame):
    raise _ItemTimeout()


def worker_init(memory_limit_mb: int | None) -> None:
    """The pool's initializer: the address-space limit, math-verify's warnings off, a warm-up parse."""
    import logging

    if memory_limit_mb:
        import resource

        lim = memory_limit_mb * 2**20
        try:
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        except (ValueError, OSError):
            pass
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout disabled" warning: we time out ourselves
    _parse("1")  # import and warm math-verify / latex2sympy before the first timed item


_LATEX_CONFIG: list | None = None


def _parse(ans: str):
    """math-verify's parse of `\\boxed{ans}` with only the LaTeX extractor: its ExprExtractionConfig calls sympy's
    parse_expr on the text, which we never do on model output. Timeouts are ours (see `worker_chunk`)."""
    global _LATEX_CONFIG
    from math_verify import LatexExtractionConfig, parse

    if _LATEX_CONFIG is None:
        _LATEX_CONFIG = [LatexExtractionConfig()]
    return parse("\\boxed{" + ans + "}", extraction_config=_LATEX_CONFIG, parsing_timeout=None)


_PROBE_POINTS = ((1.1370718, 0.6180339, 2.7182818, 1.4142135), (2.3025850, 1.7320508, 0.5772156, 3.1415926))
_DOMAIN_FLAGS = (
    "is_integer",
    "is_rational",
    "is_irrational",
    "is_algebraic",
    "is_transcendental",
    "is_negative",
    "is_nonpositive",
    "is_zero",
    "is_imaginary",
)


def _certainly_unequal(g: list, p: list) -> bool:
    """True when math-verify's `verify(g, p)` is certainly False, so its `simplify` (tens of ms per wrong answer)
    can be skipped: both parses are [real-valued expression, string] with different strings, and `gold - pred`
    evaluates (30 digits) to a clearly non-zero real number (> 1e-4 absolute and 1e-6 relative) — for constants
    directly, with free symbols (real, at most 4, no integer/sign assumptions) at one of two fixed probe points, which
    proves the difference is not identically zero. verify's True paths for two such expressions are structural
    equality, 6-decimal rounding, `(a-b).evalf() == 0` and `simplify(a-b) == 0`; none can then hold. Symbols
    (verify's special symbol matching), relations, sets, tuples, matrices, percentages (9% == 9 in verify), sums,
    products, integrals, limits, derivatives, piecewise and anything non-real or non-finite are left to verify.
    Property-tested against verify in tests/grading/test_grading.py."""
    import sympy
    from sympy.matrices.expressions import MatrixExpr

    if len(g) != 2 or len(p) != 2 or not isinstance(g[1], str) or not isinstance(p[1], str):
        return False
    if g[1].strip() == p[1].strip():
        return False
    a, b = g[0], p[0]
    for e in (a, b):
        # Sums/products/integrals/limits/derivatives/piecewise: their value at a non-integer probe need not match
        # what verify's `doit`/`simplify` make of them, so they are left to verify.
        if (
            not isinstance(e, sympy.Expr)
            or isinstance(e, (MatrixExpr, sympy.Symbol))
            or e.has(
                sympy.UnevaluatedExpr,
                sympy.Sum,
                sympy.Product,
                sympy.Integral,
                sympy.Limit,
                sympy.Derivative,
                sympy.Piecewise,
            )
        ):
            return False
    syms = sorted(a.free_symbols | b.free_symbols, key=str)
    if len(syms) > 4 or any(
        not isinstance(x, sympy.Symbol) or x.is_real is not True or any(getattr(x, f) for f in _DOMAIN_FLAGS)
        for x in syms
    ):
        return False
    for point in _PROBE_POINTS if syms else _PROBE_POINTS[:1]:
        sub = {x: sympy.Float(v, 30) for x, v in zip(syms, point)}
        vals = []
        for e in (a, b):
            try:
                v = complex(sympy.N(e.subs(sub) if sub else e, 30))
            except (TypeError, ValueError, ArithmeticError, AttributeError):
                return False
            if abs(v.imag) > 1e-12 or not math.isfinite(v.real):
                vals = []
                break
            vals.append(v.real)
        if vals:
            diff = abs(vals[0] - vals[1])
            if diff > 1e-4 and diff > 1e-6 * max(abs(vals[0]), abs(vals[1])):
                return True
    return False


_NOT_PLAIN_CONSTANT = ("\\circ", "°", "%", "\\degree")


def _constant_verdict(gold: str, pred: str, g: list, p: list, precision: Precision) -> bool | None:
    """A number literal (`3.1416`, `2.8`, `\\frac{7}{9}`) against a real constant with no symbols (`\\pi`,
    `2\\sqrt{2}`, `\\frac{\\sqrt3}{2}`), evaluated to 30 digits, under `precision` (`precision.values_verdict`);
    None otherwise (degrees and percentages too: math-verify reads their units). Two literals were decided by the
    parent."""
    import sympy

    for lit, other, parsed, lit_is_gold in ((pred, gold, g, False), (gold, pred, p, True)):
        value = rational(lit.strip())
        if value is None:
            continue
        if rational(other.strip()) is not None or any(t in other for t in _NOT_PLAIN_CONSTANT):
            return None
        e = parsed[0] if len(parsed) == 2 else None
        if not isinstance(e, sympy.Expr) or e.free_symbols or not e.is_number:
            return None
        try:
            v = complex(sympy.N(e, 30))
        except (TypeError, ValueError, ArithmeticError, AttributeError):
            return None
        if abs(v.imag) > 1e-12 or not math.isfinite(v.real):
            return None
        if "." not in lit:  # an integer or fraction is exact: no tolerance (`1` is not `1 + 2^{-2020}`)
            # … unless the other side is a decimal `rational` does not read (`0.333333333`, nine places): the
            # decimal rule decides (math-verify under `numeric.installed`).
            return None if e.has(sympy.Float) else exact_zero(e - sympy.Rational(value.numerator, value.denominator))
        irrational = not e.is_Rational
        exact = Fraction(str(sympy.N(e, 30))) if irrational else Fraction(int(e.p), int(e.q))
        places = literal_places(lit, precision)
        if lit_is_gold:
            return values_verdict(value, places, exact, None, precision, irrational)
        return values_verdict(exact, None, value, places, precision, irrational)
    return None


def _judge(gold: str, pred: str, precision: Precision = ("rel", DEFAULT_REL_TOL)) -> bool:
    from math_verify import verify

    g = _GOLD_CACHE.get(gold)
    if g is None:
        g = _parse(gold)
        _GOLD_CACHE[gold] = g
        if len(_GOLD_CACHE) > _GOLD_CACHE_SIZE:
            _GOLD_CACHE.popitem(last=False)
    else:
        _GOLD_CACHE.move_to_end(gold)
    p = _parse(pred)
    verdict = _constant_verdict(gold, pred, g, p, precision)
    if verdict is not None:
        return verdict
    if _certainly_unequal(g, p):
        return False
    with installed(precision, gold + " " + pred):  # our number rule inside tuples, sets, intervals and matrices too
        return bool(verify(g, p, timeout_seconds=None))


def worker_chunk(
    items: list[tuple[str, str, Precision]], item_timeout_s: float, budget_s: float
) -> list[tuple[str, bool]]:
    """Grade (gold, pred, precision) items in order; stop starting new ones after `budget_s` (the caller re-queues
    the rest). Returns (status, correct) per graded item."""
    import signal

    signal.signal(signal.SIGALRM, _on_alarm)
    start = time.monotonic()
    out: list[tuple[str, bool]] = []
    for gold, pred, precision in items:
        if out and time.monotonic() - start > budget_s:
            break
        try:
            try:
                signal.setitimer(signal.ITIMER_REAL, item_timeout_s)
                ok = _judge(gold, pred, precision)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            res = ("correct" if ok else "wrong", ok)
        except _ItemTimeout:
            res = ("timeout", False)
            _clear_sympy_cache()
        except (Exception, RecursionError, MemoryError):  # noqa: BLE001 - a bad sample must not kill the chunk
            res = ("error", False)
        out.append(res)
    return out


def _clear_sympy_cache() -> None:
    """After an interrupted computation, drop sympy's caches (they may hold the huge half-built expression)."""
    try:
        from sympy.core.cache import clear_cache

        clear_cache()
    except Exception:  # noqa: BLE001
        pass
