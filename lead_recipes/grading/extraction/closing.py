"""The last stated value of a response with no box, no answer marker and no concluding sentence, the last resort of
the `final_answer` policy: the math span, or the number with its unit or currency, that closes the response or its
last sentence ("So we get $x \\neq 5$.", "Final: \\( 3/4 \\)", "The total is 1,204.50€."). The refusals of the
statement reader apply (hedges, negations, bounds, alternatives, retractions, questions, a cut-off sentence).
See docs/grading.md#extraction-policies.
"""

from __future__ import annotations

import re

from lead_recipes.grading.extraction.assertion import SPAN_RE
from lead_recipes.grading.extraction.statement import (
    BOUND_BEFORE_RE,
    HEDGE_RE,
    NOT_THE_VALUE_RE,
    RETRACT_RE,
    closing_part,
    rhs,
    strip_end_junk,
)

# A closing math span, then at most a full stop; without the stop it must follow a colon or stand on its own line.
_SPAN_END_RE = re.compile(
    r"(?:\$\$(?P<a>.+?)\$\$|\\\[(?P<b>.+?)\\\]|\\\((?P<c>.+?)\\\)|(?<![\\$])\$(?!\$)(?P<d>[^$]+?)(?<!\\)\$)"
    r"[ \t]*(?P<stop>[.!]?)[ \t*]*\Z",
    re.S,
)
# A closing number with its currency sign or unit (at most two words), then a full stop.
_NUMBER_END_RE = re.compile(
    r"(?:(?<=[\s(:=])|\A)(?P<cur>[$€£¥]?)[ \t]?(?P<num>-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)"
    r"[ \t]?(?P<post>[€£¥%]?)(?:[ \t]+(?P<unit>[A-Za-z]+(?:/[A-Za-z]+|[ \t]+[A-Za-z]+)?))?[ \t]*[.!][ \t*]*\Z"
)
_NUMBER_TAIL_CHARS = 80  # a closing number with its unit ends the text: search only its last characters
_ALTERNATIVE_BEFORE_RE = re.compile(r"(?i)\b(?:or|either|wait|hmm|check|try|guess|suppose|let)\b")
# Words the statement reader's refusals hang on, or that make the value a modal, a condition or a description
# ("may be $9$", "Unless …, the answer is $10$" (refused there already), "This is achieved when $x = 1$").
_NOT_ASSERTED_RE = re.compile(
    r"(?i)\b(?:answer|may|would|should|seems?|appears?|(?:un)?likely|presumably|apparently|believe|think|expect|"
    r"unless|assuming|provided|supposing|when|whenever|where|while|achieved|attained|occurs?|no|none|never|"
    r"contradict\w*|because|impossible|for\s+(?:all|every|each|any))\b"
)
# A value right after a preposition is an object, not what the sentence asserts ("the minimality of $m$", "the
# possible values for $\angle BAC$"); an enumeration left open (`\ldots`) is no value either.
# Setup and imperative verbs ("Compute $2+3$.", "Given: $x=5$.", "We claim $x=3$.") and reference nouns, whose
# number is no answer ("This was problem 7.", "Total tokens used: 4096.", "We consider 10 cases.", "This solution
# took 5 minutes."): a time is refused by its verb, as "15 minutes" may be the answer.
_NOT_CLOSING_RE = re.compile(
    r"(?i)\b(?:limit\w*|approach\w*|tends?|given|note|recall\w*|let|set|define\w*|denote\w*|consider\w*|assum\w*|"
    r"claim\w*|remains?|show\w*|prove\w*|compute|find|calculate|evaluate|simplify|solve|determine|verify|check\w*|"
    r"plug\w*|substitut\w*|equations?|problems?|steps?|theorems?|lemmas?|sections?|pages?|chapters?|figures?|"
    r"ratings?|tokens?|cases?|questions?|exercises?|parts?|lines?|items?|took|spent|elapsed)\b"
)
# The sentence must assert the value: a label (`Final:`), a verb of result right before it ("the total is",
# "which makes", "to obtain") or a conclusion word ("so she spends"). Anything else is too weak to read.
_ASSERTS_RE = re.compile(
    r"(?i)(?::|=|\b(?:is|are|equals?|makes?|making|gives?|giving|yields?|yielding|get|gets|obtain|becomes?))\s*\Z|"
    r"\b(?:so|thus|therefore|hence|consequently|altogether)\b"
)
_OBJECT_RE = re.compile(r"(?i)\b(?:of|for|to|from|with|by|than|on|in|into|over|under|at)\s*\Z")
_OPEN_LIST_RE = re.compile(r"\\[lc]?dots\b")
# Values of one list: `$(3,0)$ and $(-3,1)$`, `$1$, $2$, and $3$`.
_JOIN_RE = re.compile(r"\s*(?:,\s*(?:and\s+)?|and\s+)")
_CURRENCY = {"$": "dollars", "€": "euros", "£": "sterling", "¥": "yen"}  # names the units table knows


def _last_sentence(part: str, value_start: int) -> str:
    """The text of the sentence the value closes, from the last sentence end before it."""
    head = part[:value_start]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)|\n", head)]
    return head[ends[-1] if ends else 0 :]


def _refused(lead: str) -> bool:
    """True when the words before the value do not assert it: a hedge, negation, condition, bound, alternative,
    retraction or question."""
    return bool(
        HEDGE_RE.search(lead)
        or NOT_THE_VALUE_RE.search(lead)
        or _NOT_CLOSING_RE.search(lead)
        or BOUND_BEFORE_RE.search(lead)
        or _ALTERNATIVE_BEFORE_RE.search(lead)
        or _NOT_ASSERTED_RE.search(lead)
        or RETRACT_RE.match(lead)
        or _OBJECT_RE.search(lead)
        or "?" in lead
    )


def _span_search_start(part: str) -> int:
    """Where a closing span can start: just before the opener that pairs with the text's last closer. Searching the
    whole part for a pattern anchored at its end costs time quadratic in its length."""
    tail = part.rstrip(" \t*.!")
    closer = next((c for c in ("$$", "\\)", "\\]", "$") if tail.endswith(c)), None)
    if closer is None:
        return len(part)
    opener = {"$$": "$$", "\\)": "\\(", "\\]": "\\[", "$": "$"}[closer]
    return max(0, tail.rfind(opener, 0, len(tail) - len(closer)) - 1)


def extract_closing(text: str) -> str | None:
    """The value that closes `text` (after the last `</think>`; see the module docstring), or None."""
    cut = text.rfind("</think>")
    if cut >= 0:
        text = text[cut + len("</think>") :]
    elif "<think>" in text:
        return None
    part = strip_end_junk(closing_part(text)).rstrip()
    if not part:
        return None
    m = _SPAN_END_RE.search(part, _span_search_start(part))
    if m is not None:
        vals = [next(m.group(k) for k in "abcd" if m.group(k) is not None).strip()]
        lead = _last_sentence(part, m.start())
        line_start = part.rfind("\n", 0, m.start()) + 1
        own_line = not part[line_start : m.start()].strip()
        if own_line:  # a value on its own line closes the line before it ("the product is:")
            lead = part[part.rfind("\n", 0, max(0, line_start - 1)) + 1 : line_start].rstrip("\n")
        start = len(lead)
        for span in reversed(list(SPAN_RE.finditer(lead))):  # the values listed before it
            if not _JOIN_RE.fullmatch(lead, span.end(), start):
                break
            vals.insert(0, next(g for g in span.groups() if g is not None).strip())
            start = span.start()
        if (
            not (m.group("stop") or own_line or lead.rstrip().endswith(":"))
            or _refused(lead[:start])
            or _refused(lead)
            or not _ASSERTS_RE.search(lead[:start])
            or not all(vals)
            or any(_OPEN_LIST_RE.search(v) for v in vals)
        ):
            return None
        labels = {v.split("=")[0].strip() for v in vals if "=" in v}
        if len(vals) > 1 and (len(labels) > 1 or labels and not all("=" in v for v in vals)):
            vals = vals[-1:]  # `$u_5=34$ and $u_7=233$`: separate results, the last one closes
        return ", ".join(rhs(v) for v in vals)
    m = _NUMBER_END_RE.search(part, max(0, len(part) - _NUMBER_TAIL_CHARS))
    lead = _last_sentence(part, m.start()) if m is not None else ""
    if m is None or not lead.strip() or _refused(lead) or _refused(m.group("unit") or ""):
        return None  # a number alone is a list item cut off ("…\n2."), not a statement
    if not _ASSERTS_RE.search(lead):
        return None
    num = m.group("num")
    if m.group("post") == "%":
        return f"{num}\\%"
    unit = _CURRENCY.get(m.group("cur") or m.group("post")) or m.group("unit")
    return f"{num}\\text{{ {unit}}}" if unit else num
