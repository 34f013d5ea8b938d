"""Final-answer text handling in the caller's process: the extraction policies (`boxed`, `final_answer`), the last
complete box after `</think>`, normalisation, and the exact verdicts that need no math-verify (`fast_verdict`,
`explosive`). No math-verify, no sympy, no processes. See docs/grading.md#extraction-policies.
"""

from __future__ import annotations

import math
import re
from typing import Any

from lead_recipes.grading.extraction.brackets import tuple_items
from lead_recipes.grading.extraction.closing import extract_closing
from lead_recipes.grading.extraction.numbers import rational
from lead_recipes.grading.extraction.pairing import (
    BOX_RE,
    BRACE_RE,
    box_spans,
    final_run,
    gold_text,
    is_labelled,
    is_list,
    join,
    last_box,
)
from lead_recipes.grading.extraction.statement import extract_statement
from lead_recipes.grading.extraction.turns import cut_turn, echo_starts, question_starts

EXTRACTION_POLICIES = ("boxed", "final_answer")
MAX_ANSWER_CHARS = 4_000  # extracted answers / golds longer than this are not sent to sympy (`error`)


# ---------------------------------------------------------------------------------------------------- extraction


def to_text(x: Any) -> str | None:
    """Model text or a label of any JSON type → str (invalid UTF-8 and lone surrogates become U+FFFD)."""
    if x is None:
        return None
    if isinstance(x, bytes):
        x = x.decode("utf-8", "replace")
    elif isinstance(x, bool):
        x = str(x)
    elif isinstance(x, (int, float)):
        x = repr(x) if isinstance(x, float) and not x.is_integer() else str(int(x)) if isinstance(x, float) else str(x)
    elif isinstance(x, (list, tuple)):
        x = ", ".join(t for t in (to_text(v) for v in x) if t is not None)
    elif not isinstance(x, str):
        x = str(x)
    try:
        x.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (e.g. from JSON "\ud800"): replace rather than crash later
        x = x.encode("utf-8", "replace").decode("utf-8")
    return x


def check_extraction(policy: str) -> str:
    """`policy` if it is one of EXTRACTION_POLICIES, else ValueError naming the choices."""
    if policy not in EXTRACTION_POLICIES:
        raise ValueError(f"unknown extraction policy {policy!r}; choose one of {', '.join(EXTRACTION_POLICIES)}")
    return policy


def extract_final_answer(
    text: str, policy: str = "boxed", gold: str | None = None, problem: str | None = None
) -> str | None:
    """The final answer of a response under `policy`, read before its first turn marker and its first echo of
    `problem` or few-shot `Q:` line after an answer given after the last `</think>`
    (`lead_recipes.grading.extraction.turns`), after the last `</think>`: the last complete `\\boxed{}`/`\\fbox{}`
    (an unclosed last box falls back to the previous complete one); when `gold` holds
    several values (`lead_recipes.grading.extraction.pairing.is_list`) all boxes of the closing statement joined
    into one list (`pairing.final_run`); when `gold` is a tuple and the closing statement has one labelled box per
    component, those boxes as a labelled list (`x = 2, y = 3`). A box wins over any statement after it, under both
    policies. Under `final_answer` a response without a box gives the answer stated in its closing part
    (`lead_recipes.grading.extraction.statement.extract_statement`). None when there is no non-empty final answer."""
    check_extraction(policy)
    text = to_text(text)
    if not text:
        return None
    text = cut_turn(text)
    # Only after the last `</think>` (none inside an unclosed `<think>`): a model re-reading the problem while it
    # thinks has not ended its turn, and the answer before an echo must come after `</think>` too.
    think = text.rfind("</think>")
    after = think + len("</think>") if think >= 0 else (len(text) + 1 if "<think>" in text else 0)
    starts = sorted({*echo_starts(text, to_text(problem)), *question_starts(text)})
    for pos in starts:  # a restatement before the answer is no new turn
        if pos < after:
            continue
        found = _extract(text[:pos], policy, gold)
        if found is not None:
            return found
    return _extract(text, policy, gold)


def _extract(text: str, policy: str, gold: str | None) -> str | None:
    """`extract_final_answer` of a response already cut at its turn."""
    cut = text.rfind("</think>")
    body = text[cut + len("</think>") :] if cut >= 0 else text
    last = last_box(body)
    if last is None:
        if policy == "final_answer":
            try:
                return extract_statement(text) or extract_closing(text)
            except Exception:  # noqa: BLE001 - a closing part we cannot read states no answer
                return None
        return None
    gold_n = normalize_answer(gold_text(to_text(gold))) if gold is not None else ""
    if gold_n and BOX_RE.search(body, 0, last[0]):
        if is_list(gold_n):
            return join(final_run(body, box_spans(body), is_labelled(gold_n)))
        size = len(tuple_items(gold_n) or ())  # `(2, 3)` answered `x = \boxed{2}`, `y = \boxed{3}`: the labelled tuple
        run = final_run(body, box_spans(body), labelled=True) if size else []
        if size and len(run) == size and all("=" in x for x in run):
            return join(run)
    return last[2]


_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**"))


def normalize_answer(ans: str) -> str:
    """Whitespace, surrounding `$`/`\\(\\)`/`\\[\\]` and markdown bold stripped; nothing semantic."""
    s = ans.strip()
    changed = True
    while changed and s:
        changed = False
        for a, b in _WRAPPERS:
            if len(s) > len(a) + len(b) and s.startswith(a) and s.endswith(b):
                s = s[len(a) : -len(b)].strip()
                changed = True
    return s


# ---------------------------------------------------------------------------------------------------- fast paths
_INT_RE = re.compile(r"-?[0-9]{1,15}")
_SAFE_IDENTICAL_RE = re.compile(r"[0-9A-Za-z\\{}()\[\]^_+\-*/.,:;|<>=!' ]+")


def _balanced(s: str) -> bool:
    depth = 0
    for m in BRACE_RE.finditer(s):
        depth += 1 if m.group(0) == "{" else -1
        if depth < 0:
            return False
    return depth == 0


def fast_verdict(gold: str, pred: str) -> bool | None:
    """A verdict math-verify is known to give, without calling it, or None. Integers of ≤ 15 digits compare as
    integers; plain decimal/fraction literals compare as exact rationals — equal → True, different by more than 1e-4
    absolute and 1e-6 relative → False (verify's paths for two numbers are exact equality, 6-decimal rounding and
    simplify of the difference), anything in between → None; identical brace-balanced strings from a plain LaTeX
    alphabet are equal (verify's string fallback compares them equal even when sympy cannot parse them).
    Property-tested against math-verify in tests/grading/test_grading.py."""
    if _INT_RE.fullmatch(gold) and _INT_RE.fullmatch(pred):
        return int(gold) == int(pred)
    if gold == pred and _SAFE_IDENTICAL_RE.fullmatch(gold) and _balanced(gold):
        return True
    if len(gold) <= 40 and len(pred) <= 40:
        a, b = rational(gold), rational(pred)
        if a is not None and b is not None:
            if a == b:
                return True
            diff = abs(a - b)
            if diff > 1e-4 and diff > 1e-6 * max(abs(a), abs(b)):
                return False
    return None


_POW_CHAIN_RE = re.compile(r"\d+(?:\s*\^\s*\{?\s*\(?\s*\d+)+")
_BIG_FACTORIAL_RE = re.compile(r"\d{6,}\s*\)?\s*!")
_EXPLOSIVE_DIGITS = 1e6


def explosive(ans: str) -> bool:
    """True when `ans` holds an integer power tower or factorial with more than ~10^6 digits (`9^{9^{9^9}}`,
    `2^{10^{7}}`, `(10^{6})!`). sympy would build that integer in C, where no signal interrupts it; math-verify
    cannot finish either (its verdict is a timeout, i.e. False), so we answer `timeout` without starting it."""
    if _BIG_FACTORIAL_RE.search(ans):
        return True
    for m in _POW_CHAIN_RE.finditer(ans):
        nums = [int(x) for x in re.findall(r"\d+", m.group(0)[:200])]
        log10_v = 0.0  # log10 of the tower's value, evaluated from the top exponent down
        for i, n in enumerate(reversed(nums)):
            if i == 0:
                log10_v = math.log10(n) if n > 0 else 0.0
                continue
            if n <= 1:
                log10_v = 0.0
                continue
            if log10_v > 300:  # the exponent alone has > 300 digits: the value is astronomically large
                return True
            log10_v = 10**log10_v * math.log10(n)
        if log10_v > _EXPLOSIVE_DIGITS:
            return True
    return False
