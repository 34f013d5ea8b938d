"""What a final-answer sentence asserts: the value after the named quantity's verb, the value that "is the
solution", or the one value of a sentence with another verb; whether the assertion is hedged, conditional, negated or
revised by a later sentence; whether a second value restates the first. No extraction of the closing part
(`statement`), no math parsing. See docs/grading.md#extraction-policies.
"""

from __future__ import annotations

import re

from lead_recipes.grading.extraction.numbers import rational

SPAN_RE = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|(?<![\\$])\$(?!\$)(.+?)(?<!\\)\$", re.S)
_VERB_RE = re.compile(
    r"(?i)\b(?:(?:is|are)\s+equal\s+to|equal\s+to|equals|isn't|aren't|is|are|was|were|be)(?![\w'])"
    r"|(?<=\s)=(?=\s)"
)
# Anywhere before the value these make the claim conditional or uncertain.
_STRONG_HEDGE_RE = re.compile(
    r"(?i)\b(?:if|unless|perhaps|probably|maybe|possibly|suppose|supposing|assuming|"
    r"neither|guess)\b"
)
# Right before the verb (or as the verb) these negate it or make it a possibility.
_MODAL_RE = re.compile(
    r"(?i)\b(?:cannot|can\s*not|could|might|may|must\s+not|should\s+not|would\s+not|not|never)\s*\Z|"
    r"n't\s*\Z"
)
# Anywhere in the words that lead up to an answer marker these deny or doubt what follows ("I don't think the
# answer is", "It is not true that the answer is", "We cannot conclude that the answer is").
_LEAD_NEGATION_RE = re.compile(
    r"(?i)\b(?:not|no|cannot|never|nobody|none|neither|nor|false|untrue|wrong|incorrect|"
    r"doubt|doubtful|unlikely|unsure|unclear|uncertain|disagree|deny|denies|refute|"
    r"disprove|disproves|wish|hope|hoped|whether)\b|n't\b"
)
_SUBJECT_START_RE = re.compile(r"(?i)\s*(?:the|a|an|that|there|this|our|its|their|each|every|it|all)\b")
# "is the (only) solution", "is the largest such $n$", "is the solution set": the span before it is the answer only
# when the noun names one ("is the wrong answer", "is the extraneous root" are not).
_ADJ = (
    r"only|unique|sole|final|desired|required|correct|exact|real|positive|such|largest|smallest|greatest|least|"
    r"maximum|minimum|possible"
)
# Nouns that name no answer: "$5$ is the only candidate", "$x = 2$ is the first root" (of several).
_NOT_ANSWER = (
    r"candidate|guess|estimate|assumption|hypothesis|conjecture|claim|case|step|first|second|third|other|one|last|"
    r"next|previous"
)
_IS_THE_RE = re.compile(
    rf"(?i)\s*(?:is|are)\s+(?:the|our)\s+(?:(?:{_ADJ})\s+){{0,3}}"
    r"(?:solutions?|answers?|values?|results?|range|interval|(?<=such\s)(?=\$)|(?<=[a-z]st\s)(?=\$)|"
    rf"(?!(?:{_NOT_ANSWER}|{_ADJ})s?\b)[a-z]+\b)"
    r"(?:\s+(?:set|range|interval))?"
)
# After "is the solution" / after a value, these deny it or make it conditional ("… is the solution we must
# reject", "… only if $a=1$", "$5$ (assuming $a>0$)").
_AFTER_DENIAL_RE = re.compile(
    r"(?i)\b(?:wrong|incorrect|invalid|extraneous|spurious|reject\w*|discard\w*|"
    r"exclude\w*|fails?|not|never|only\s+(?:if|when|for)|if|unless|assuming|provided|supposing|"
    r"except|but)\b|n't\b"
)


def outside_math(s: str) -> str:
    """`s` with every math span replaced by spaces of the same length."""
    return SPAN_RE.sub(lambda m: " " * len(m.group(0)), s)


def split_assertion(sentence: str) -> tuple[str, str, str] | None:
    """(subject, verb, rest) at the last asserting verb outside math, or None when there is none."""
    last = next(reversed(list(_VERB_RE.finditer(outside_math(sentence)))), None)
    if last is None:
        return None
    return sentence[: last.start()], last.group(0), sentence[last.end() :]


def hedged_subject(subject: str, verb: str = "is") -> bool:
    """True when the claim made by `subject` + `verb` is conditional, uncertain or negated (see the docstring)."""
    plain = outside_math(subject)
    return bool(_STRONG_HEDGE_RE.search(plain) or _MODAL_RE.search(plain) or "n't" in verb.lower())


def negated_lead(lead: str) -> bool:
    """True when the words before an answer marker (same sentence) deny, doubt or condition it: a negation or doubt
    in the marker's own clause (after the last `,` `;` `:` outside math: "Since no other value works, the answer is
    5" is asserted; a clause opening with "that" belongs to what precedes it), a condition or uncertainty anywhere
    ("If $a=1$, then the answer is 3")."""
    plain = outside_math(lead)
    clause = re.split(r"[,;:]", plain)[-1]
    if re.match(r"(?i)\s*(?:that|whether)\b", clause):  # "It is not true, however, that the answer is"
        clause = plain  # a "that" clause is the object of a verb before it
    return bool(_LEAD_NEGATION_RE.search(clause) or hedged_subject(lead))


def denied_after(rest: str) -> bool:
    """True when the rest of a sentence after its value or "is the solution" denies or conditions it."""
    return _AFTER_DENIAL_RE.search(outside_math(rest)) is not None


def value_first(sentence: str) -> str | None:
    """The content of the math span `sentence` opens with (after ", " or "that"), when "is/are the" follows it."""
    m = re.match(r"[\s,:]*(?:that\s+)?", sentence)
    span = SPAN_RE.match(sentence, m.end())
    is_the = _IS_THE_RE.match(sentence, span.end()) if span is not None else None
    if is_the is None or denied_after(sentence[span.end() :]):
        return None
    return next(g for g in span.groups() if g is not None).strip() or None


def starts_subject(rest: str) -> bool:
    """True when `rest` opens with a noun phrase ("The largest $n$ is 34") rather than with its value ("$34$")."""
    return _SUBJECT_START_RE.match(rest) is not None


# A sentence after an answer that revises it ("So the answer is $\frac12$. But order matters, giving $1$.").
_REVISION_RE = re.compile(
    r"(?i)(?:\A|[.!?\n])[\s*_]*(?:but|however|wait|hmm+|actually|oops|no\b|hold\s+on|on\s+second\s+thought|"
    r"let\s+me\s+re\w+|i\s+made|this\s+is\s+(?:wrong|incorrect)|that\s*'?s\s+(?:wrong|incorrect))"
)
_SAME_RE = re.compile(
    r"\s*,?\s*\(?\s*(?:or|i\.\s*e\.|that\s+is|which\s+is)\s*,?\s*(?:\$([^$]*)\$|\\\((.*?)\\\)|(-?[\d.,]+\s*\\?%?))\s*\)?"
)
# One sentence's words that make a lone number no plain statement of the answer ("might", "at least", "unless").
_NOT_PLAIN_RE = re.compile(
    r"(?i)\b(?:not|cannot|neither|either|maybe|perhaps|probably|possibly|likely|unlikely|presumably|seems?|"
    r"appears?|guess|might|could|may|if|unless|assuming|"
    r"provided|only|less|more|fewer|greater|most|least|under|over|above|below|between|within|about|"
    r"approximately|around|nearly|or)\b|n't\b"
)


def revised(after: str) -> bool:
    """True when the sentence after the answer's (`after` starts right after its marker) opens by revising it: "But",
    "However", "Wait", "Hmm", "Actually", "No", "Let me recheck", "I made a mistake"."""
    end = re.search(r"[.!?\n](?!\d)", after)
    return end is not None and _REVISION_RE.match(after, end.start()) is not None


def _number(s: str):
    """A literal's exact value, a percentage as a fraction of one (`25\\%` → 1/4); None for anything else."""
    s = s.strip()
    pct = s.endswith("%")
    v = rational(s.rstrip("%").rstrip("\\").strip().replace(",", "") if pct else s)
    return v / 100 if pct and v is not None else v


def restated_same(value: str, tail: str) -> int:
    """Length of a restatement of `value` in another form at the start of `tail` ("$\\frac14$, or $25\\%$",
    "(or $0.25$)", ", i.e. $0.25$"), 0 when `tail` opens with none, with another value (an alternative) or with the
    same spelling again."""
    m = _SAME_RE.match(tail)
    if m is None:
        return 0
    other = next(g for g in m.groups() if g is not None)
    a, b = _number(value), _number(other)
    return m.end() if a is not None and a == b and other.strip() != value.strip() else 0


def sole_value(sentence: str) -> str | None:
    """The one value of a concluding sentence with any verb ("Tom has 7 apples left", "Janet makes $\\$18$ a
    day"): its only number, or its only math span when that is a plain value; None when it holds more than one, or a
    word that hedges, bounds or conditions it."""
    plain = outside_math(sentence)
    spans = [m for m in SPAN_RE.finditer(sentence) if re.search(r"\d", m.group(0))]
    nums = re.findall(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?![\w.]*\d)", plain)
    if (
        len(spans) + len(nums) != 1
        or _NOT_PLAIN_RE.search(plain)
        or denied_after(sentence)
        or re.search(r"[=<>]", plain)
    ):
        return None
    if nums:
        return nums[0].rstrip(",")
    value = next(g for g in spans[0].groups() if g is not None).strip()
    letters = re.sub(r"\\text\{[^{}]*\}|\\[A-Za-z]+", "", value)
    return None if re.search(r"[A-Za-z=<>]", letters) else value
