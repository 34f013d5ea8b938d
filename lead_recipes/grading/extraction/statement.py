"""The final-answer statement of a solution that has no box, the fallback of the `final_answer` policy: an answer
marker, else the last complete concluding sentence, else the last displayed expression, read only in the closing
part after `</think>`. No box handling, no search of the reasoning, no math parsing.
See docs/grading.md#extraction-policies.
"""

from __future__ import annotations

import re

from lead_recipes.grading.extraction.assertion import (
    SPAN_RE,
    denied_after,
    hedged_subject,
    negated_lead,
    restated_same,
    revised,
    sole_value,
    split_assertion,
    starts_subject,
    value_first,
)
from lead_recipes.grading.extraction.brackets import top_split
from lead_recipes.grading.extraction.pairing import REJECTED_RE

_TAIL_CHARS = 1_500  # the closing part is at most this many characters from the end
_CLOSING_PARAGRAPHS = 2  # … and at most this many paragraphs (blank-line separated)
_MAX_VALUE_CHARS = 400  # a stated value longer than this is not an answer statement

_PARA_SPLIT_RE = re.compile(r"\n[ \t]*\n")
_END_JUNK_RE = re.compile(r"(?:\s|\$?\\(?:blacksquare|square|Box|qed)\$?|\bQ\.?E\.?D\.?|∎|□)+\Z")
_JUNK_WINDOW = 64
_MARKER_RE = re.compile(
    r"(?:\bthe\s+)?\b(?:final\s+answer|answer)\b(?:\s+to\s+(?:the|this)\s+[a-z ]{0,40}?)?"
    r"[\s*#_]*(?:is\s*:?|:|=|\n)[\s*#_]*",
    re.I,
)
# The dataset answer lines: `#### 18` (GSM8K, also after text on its line) and a line `A: 18` (the verifier paper's
# solutions); each holds only a number. `A:` counts only as the last line and never in a lettered list (`B:` on a
# line of its own: the choices `A: 12`, `B: 18`, or labelled points).
_GSM8K_RE = re.compile(r"(?:(?<=\n)|\A|(?<=\s))####[ \t]+(?=-?\$?\d[\d,.]*[ \t]*(?:\n|\Z))")
_A_LINE_RE = re.compile(r"(?:(?<=\n)|\A)[ \t]*A:[ \t]+(?=-?\$?\d[\d,./]*[ \t]*\.?\s*\Z)")
_LETTERED_RE = re.compile(r"(?m)^[ \t]*B:")
_CONCLUDE_RE = re.compile(
    r"(?:^|(?<=[.!?\n]))[\s*]*(?:therefore|thus|hence|so|consequently|in\s+conclusion|"
    r"in\s+summary|in\s+total|altogether|overall|finally|we\s+conclude\s+that|since|because|given\s+that|(?=the\b))\b[,:]?",
    re.I,
)
_DISPLAY_RE = re.compile(r"\\\[(.+?)\\\]|\$\$(.+?)\$\$|\\begin\{(equation|align|gather)\*?\}(.+?)\\end\{\3\*?\}", re.S)
_CURRENCY_RE = re.compile(r"\$\s?-?\d[\d,]*(?:\.\d+)?")
# A mark ends a sentence only before a space, the end or `*`, so a decimal point (`3.5`) never does.
_SENTENCE_END_RE = re.compile(r"[.!?](?=\s|\Z|\*)|\n")
_TOP_EQ_RE = re.compile(r"(?<![<>!\\:])=(?![=>])")
# A value after one of these words is not asserted ("the answer is probably 5", "cannot be 5", "isn't 5").
HEDGE_RE = re.compile(r"(?i)\b(?:not|cannot|neither|either|maybe|perhaps|probably|possibly|might|could|if)\b|n't\b")
# Before the value these make it a bound, not the value ("the answer is less than $5$", "at most $5$"); after it,
# "or less/more/fewer" does ("$5$ or less"). "approximately"/"about" stay a value.
BOUND_BEFORE_RE = re.compile(
    r"(?i)\b(?:(?:less|greater|more|fewer|smaller|larger|bigger|higher|lower)\s+than|"
    r"at\s+(?:most|least)|no\s+(?:more|less|greater|fewer)|up\s+to|under|below|above|"
    r"exceed\w*|bounded|between|within)\b"
)
_BOUND_AFTER_RE = re.compile(
    r"(?i)\s*,?\s*(?:or|and)\s+(?:less|more|fewer|greater|lower|higher|smaller|larger|"
    r"above|below|over|under|up|down|beyond)\b|\s*(?:at\s+(?:most|least)|or\s+so)\b"
)
# A value its sentence rejects (the several-boxes rule's words), excepts, calls a bound or an example, or only nears
# is not the answer ("The extraneous root is $12$.", "An upper bound is $12$.", "For instance, $12$.").
NOT_THE_VALUE_RE = re.compile(
    REJECTED_RE.pattern + r"|\b(?:except\w*|bound\w*|\w*example|instance|e\.\s?g\.|such\s+as|hint|nearly|"
    r"almost|roughly)\b"
)
# After the value these make it conditional ("$5$ (assuming $a>0$)").
_CONDITION_AFTER_RE = re.compile(r"(?i)\b(?:assuming|provided|supposing|unless|only\s+(?:if|when|for))\b")
# A value followed, in the same sentence, by a joiner and another value is one of several candidates.
# "and" only joins values when one follows within two words ("$5$ and $6$", not "$5$, and the remainder is $2$").
_ALTERNATIVE_RE = re.compile(
    r"(?i)\b(?:(?:or|nor|otherwise|but|if)\b.*?|and\s+(?:[a-z]+\s+){0,2}?)(?:\d|\$|\\\()", re.S
)
# The same value again, approximately: a restatement, not an alternative ("$\frac{5}{36}$, or about $0.139$").
_RESTATED_RE = re.compile(
    r"(?i)\s*,?\s*\(?\s*(?:or|i\.\s*e\.|that\s+is|which\s+is)?\s*,?\s*(?:about|approximately|roughly|"
    r"around|nearly|≈|\\approx)\s*(?:\$[^$]*\$|\\\(.*?\\\)|-?[\d.,]+)\s*\)?"
)
RETRACT_RE = re.compile(r"(?i)[\s.,;:!…-]*(?:no\b|wait\b|actually\b)")
_ADVERB_RE = re.compile(r"(?i)(?:(?:therefore|thus|hence|then|actually|indeed|clearly|simply|just|in\s+fact)\b[\s,]*)+")
_LATER_RE = re.compile(r"(?i)\s*[,;]?\s*(?:and\s+)?(?:so|hence|thus|therefore|giving|which\s+gives)\b[\s,]*")
_CHOICE_RE = re.compile(r"\(?[A-E]\)?")
_CORRECTED_RE = re.compile(
    r"(?i)not\s+(?:\$[^$]{1,40}\$|-?[\d.,/]+)\s*[,;]?\s*(?:but(?:\s+rather|\s+instead)?|it\s+is|rather)\b[\s,]*"
)
_PASSIVE_RE = re.compile(
    r"(?i)\s*(?:\w+ed|given|taken|written|seen|known|shown|chosen|done|found|made)\s+(?:by|from|to|as|with|in|into|over)\b"
)


def closing_part(text: str) -> str:
    """The last `_CLOSING_PARAGRAPHS` non-empty paragraphs within the last `_TAIL_CHARS` characters."""
    tail = text[-_TAIL_CHARS:]
    paras = [p for p in _PARA_SPLIT_RE.split(tail) if p.strip()]
    return "\n\n".join(paras[-_CLOSING_PARAGRAPHS:])


def strip_end_junk(s: str) -> str:
    """`s` without the whitespace and end-of-proof marks (`$\\blacksquare$`, `QED`, `∎`) that end it. The pattern is
    anchored at the end, so it is applied to the last `_JUNK_WINDOW` characters at a time: over the whole text a
    search tries every whitespace position and costs time quadratic in its length."""
    while True:
        cut = max(0, len(s) - _JUNK_WINDOW)
        kept = _END_JUNK_RE.sub("", s[cut:])
        if cut == 0 or kept:
            return s[:cut] + kept
        s = s[:cut]


def _has_variables(expr: str) -> bool:
    """True when `expr` has a letter outside a LaTeX command name (`x`, `AB`), i.e. it is not a plain value."""
    return re.search(r"[A-Za-z]", re.sub(r"\\text\{[^{}]*\}|\\[A-Za-z]+", "", expr)) is not None


def rhs(expr: str) -> str:
    """Right-hand side of the last top-level `=` when it is a plain value, else the whole expression; an approximation
    after it is dropped (`P = \\frac{5}{36} \\approx 0.139` → `\\frac{5}{36}`)."""
    exact, approx, _ = expr.partition("\\approx")
    if approx and exact.strip():
        left = rhs(exact)
        return left if not _has_variables(left) else rhs(expr[len(exact) + len(approx) :])
    depth, last = 0, -1
    for i, ch in enumerate(expr):
        if ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
        elif ch == "=" and depth == 0 and _TOP_EQ_RE.match(expr, i):
            last = i
    if last < 0:
        return expr.strip()
    right = expr[last + 1 :].strip()
    return right if right and not _has_variables(right) else expr.strip()


def _value(rest: str, equation_rhs: bool) -> str | None:
    """The value stated at the start of `rest`: its first math span if one starts the sentence, else the rest of
    the sentence (plain words, or a currency amount)."""
    rest = rest.lstrip(" \t*_:")
    adverb = _ADVERB_RE.match(rest)  # "is therefore 20", "is actually 21"
    rest = rest[adverb.end() :] if adverb else rest
    corrected = _CORRECTED_RE.match(rest)  # "not 6 but 7", "not $5$; it is $6$": the correction is asserted
    if corrected:
        return _value(rest[corrected.end() :], equation_rhs)
    sentence = rest[: _sentence_len(rest)]
    first_value = value_first(sentence)
    if first_value is not None:
        return rhs(first_value)  # "$x \ge 5$ is the solution"
    if starts_subject(sentence):  # "The largest $n$ is 34": the value is what the verb asserts
        parts = split_assertion(sentence)
        if parts is not None:
            subject, verb, after = parts
            if hedged_subject(subject, verb) or _PASSIVE_RE.match(after):
                return None  # "the remainder when $N$ is divided by 1000": "is" asserts no value there
            return _value(rest[len(subject) + len(verb) :], equation_rhs)
    end = _SENTENCE_END_RE.search(rest)
    if end is not None and rest[end.start()] == "?":
        return None  # a question is not a statement
    first = re.search(r"\d|\$|\\\(", rest[: end.start()] if end else rest)
    before = rest[: first.start() if first else (end.start() if end else len(rest))]
    if HEDGE_RE.search(before) or BOUND_BEFORE_RE.search(before):
        return None  # "probably $5$", "not 5", "either $5$ or $6$", "less than $5$"
    m = SPAN_RE.match(rest)
    if m is None and not _CURRENCY_RE.match(rest):
        end = _SENTENCE_END_RE.search(rest)
        sentence = rest[: end.start()] if end else rest
        m = SPAN_RE.search(sentence)  # "probably $5$", "about $20$ cm": a math span after a few words
        if m is not None and (len(sentence) > 120 or len(sentence[: m.start()]) > 15 or "," in sentence[: m.start()]):
            m = None
    if m is not None and m.start() == 0:  # "$x = 3$ and $y = -2$", "$5$ and $6$": one list
        run, joiners = [m], ""
        for nxt in SPAN_RE.finditer(sentence, m.end()):
            if not re.fullmatch(r"\s*,?\s*(?:and|or)?\s*", sentence[run[-1].end() : nxt.start()]):
                break
            joiners += sentence[run[-1].end() : nxt.start()]
            run.append(nxt)
        # After a marker, "$5$ or $6$" are alternatives unless each is an assignment ("$x = 5$ or $x = 6$").
        or_joined = re.search(r"\bor\b", joiners) is not None
        ends = sentence[run[-1].end() :].strip(" .") == ""
        listed = _assigned_list(run, labelled_only=or_joined) if ends else None
        if listed is not None:
            return listed
    if m is not None:
        val = next(g for g in m.groups() if g is not None)
        tail = rest[m.end() :]
        restated = _RESTATED_RE.match(tail)
        tail = tail[restated.end() :] if restated else tail[restated_same(val, tail) :]
        later = _LATER_RE.match(tail)  # "$\frac{3}{8}$, so $m+n = 11$": the later assertion is the answer
        clause = tail[later.end() : _sentence_len(tail)] if later else ""
        if re.search(r"\d|\$|\\\(", clause):
            return _conclusion_value(clause)
        if (
            RETRACT_RE.match(tail)
            or _ALTERNATIVE_RE.search(tail[: _sentence_len(tail)])
            or _BOUND_AFTER_RE.match(tail)
            or _CONDITION_AFTER_RE.search(tail[: _sentence_len(tail)])
        ):
            return None  # "$5$ or $6$", "$5$ if $a>0$, otherwise $6$", "$5$... no wait"
        unit = re.match(r"[ \t]*([A-Za-z][A-Za-z ]{0,20}?)[ \t]*(?:[.!?,;]|\n|\Z)", tail)
        val = rhs(val) if equation_rhs else val.strip()
        if (
            unit
            and not _has_variables(val)
            and not re.match(r"(?i)(?:and|or|but|so|since|because|where|for)\b", unit.group(1))
        ):
            val = f"{val}\\text{{ {unit.group(1).strip()}}}"
        return val
    end = _SENTENCE_END_RE.search(rest)
    val = (rest[: end.start()] if end else rest).strip().rstrip("*_ ").strip()
    val = re.split(r",\s*not\b", val)[0].strip()  # "34, not 35" asserts 34
    num = re.search(r"\d", val)
    if num and (
        _ALTERNATIVE_RE.search(val[num.end() :])
        or _BOUND_AFTER_RE.search(val[num.end() :])
        or RETRACT_RE.match(rest[end.start() :] if end else "")
    ):
        return None  # "5 or 6", "5. No wait, 6"
    if _CURRENCY_RE.fullmatch(val) or _CURRENCY_RE.match(val) and "$" not in val[1:]:
        return "\\" + val
    if "$" in val or "\\(" in val or len(val) > 80:
        return None  # prose with formulas in it ("reasonable, consider that $x$ ...")
    m = re.fullmatch(r"(-?[\d.,/]*\d)\s+([A-Za-z][A-Za-z \-]*)", val)
    return f"{m.group(1)}\\text{{ {m.group(2)}}}" if m else val or None


def _sentence_len(text: str) -> int:
    """Length of the first sentence of `text` (a decimal point does not end it)."""
    end = _SENTENCE_END_RE.search(text)
    return end.start() if end else len(text)


def _complete(text: str, pos: int) -> bool:
    """True when the sentence starting at `pos` ends (`.`, `!`, `?` or a line break) before the text does — a
    response cut off mid-sentence has no statement there."""
    return _SENTENCE_END_RE.search(text, pos) is not None


def extract_statement(text: str) -> str | None:
    """The answer stated in the closing part of `text` (see the module docstring), or None."""
    if not text:
        return None
    cut = text.rfind("</think>")
    if cut >= 0:
        text = text[cut + len("</think>") :]
    elif "<think>" in text:
        return None  # still thinking: no answer has been given
    part = strip_end_junk(closing_part(text))
    if not part.strip():
        return None
    found = None
    markers = list(_MARKER_RE.finditer(part)) + (list(_GSM8K_RE.finditer(part)) if "####" in part else [])
    if "A:" in part and not _LETTERED_RE.search(part):
        markers += list(_A_LINE_RE.finditer(part))
    for m in sorted(markers, key=lambda x: x.start()):  # 1. the last answer marker
        # A prose marker ("… the answer is 1") the text runs out on was cut off mid-sentence; a label
        # ("Answer: 5", "**Final Answer** $5$") needs no closing period.
        prose = re.search(r"(?i)\bis\s*\Z", m.group(0).rstrip(" \t*#_"))  # "The answer is: 42" is a label
        if (_complete(part, m.end()) or not prose) and part[m.end() :].strip():
            found = m
    lead = ""
    if found is not None:  # "Perhaps the answer is 3", "If a = 1, then the answer is 3"
        starts = [e.end() for e in _SENTENCE_END_RE.finditer(part, 0, found.start())]
        lead = part[starts[-1] if starts else 0 : found.start()]
    if found is not None and not negated_lead(lead) and not revised(part[found.end() :]):
        val = _value(part[found.end() :], equation_rhs=True)
        if val and len(val) <= _MAX_VALUE_CHARS:
            return val
    last_para = _PARA_SPLIT_RE.split(part)[-1]
    # A refused answer statement is not read again as a concluding sentence ("The answer is $5$ or $6$.").
    floor = found.end() - (len(part) - len(last_para)) if found is not None else -1
    for m in reversed([c for c in _CONCLUDE_RE.finditer(last_para) if c.start() >= floor]):  # 2. a concluding
        end = _SENTENCE_END_RE.search(last_para, m.end())
        sentence = last_para[m.end() : end.start() if end else len(last_para)]
        after = last_para[end.end() :].strip() if end else ""
        # ended by `.`, `!` or a line break, not by the text running out; a question is not a conclusion
        if end is None or last_para[end.start()] == "?" or not _closing_remark(after):
            break  # an earlier sentence has even more after it
        if NOT_THE_VALUE_RE.search(_last_clause(last_para[m.start() : end.start()])):
            break
        val = _conclusion_value(sentence, connector=bool(m.group(0).strip(" *\n\t")))
        if val and len(val) <= _MAX_VALUE_CHARS:
            return val
    displays = list(_DISPLAY_RE.finditer(part))  # 3. the last displayed expression, closing the solution
    if displays:
        d = displays[-1]
        if _closing_remark(part[d.end() :].strip()):
            expr = _last_row(next(g for g in (d.group(1), d.group(2), d.group(4)) if g is not None))
            val = rhs(expr)
            if val and len(val) <= _MAX_VALUE_CHARS:
                return val
    return None


def _last_clause(sentence: str) -> str:
    """`sentence` after its last conclusion word: "$x = 3$ is extraneous, so the only solution is $x = -1$" rejects
    3, not -1."""
    k = next(reversed(list(re.finditer(r"(?i)\b(?:so|thus|hence|therefore)\b", sentence))), None)
    return sentence[k.end() :] if k else sentence


def _closing_remark(after: str) -> bool:
    """True when `after` may follow a final statement: nothing, or a short complete remark with no number or math
    ("I hope it is correct."); an unfinished sentence means the response was cut off while still reasoning."""
    return not after or (
        len(after) <= 80 and not re.search(r"\d|\$|\\\(", after) and after[-1] in ".!" and not RETRACT_RE.match(after)
    )  # "... no, that fails the second equation."


def _conclusion_value(sentence: str, connector: bool = False) -> str | None:
    """The value of a concluding sentence: what follows its last " is " / " are " / " gives ", else the right-hand
    side of its last equation; several values joined only by "and" / "or" / commas (`$k=-1$ or $k=-9$`) are all
    kept, as a list; an approximate restatement after a value is dropped."""
    for span in reversed(list(SPAN_RE.finditer(sentence))):
        restated = _RESTATED_RE.match(sentence, span.end())
        if restated and restated.end() > span.end():
            sentence = sentence[: span.end()] + sentence[restated.end() :]
    spans = list(SPAN_RE.finditer(sentence))
    verbs = r"\b(?:is|are|equals|gives|was|be)\b\s*(?:equal\s+to\s+|exactly\s+|approximately\s+)?"
    is_m = next(reversed(list(re.finditer(verbs, sentence))), None)
    first_value = value_first(sentence)
    if first_value is not None:
        return rhs(first_value)  # "Therefore $x \ge 5$ is the solution."
    parts = split_assertion(sentence)
    if parts is not None:  # a hedge in the subject, at the verb, or between the verb and the value
        after = parts[2]
        first = re.search(r"\d|\$|\\\(", after)
        before = after[: first.start() if first else len(after)]
        if hedged_subject(parts[0], parts[1]) or HEDGE_RE.search(before) or BOUND_BEFORE_RE.search(before):
            return None  # "Thus the answer cannot be $5$", "If $n$ is even, the largest $n$ is $34$"
    else:
        first = re.search(r"\d|\$|\\\(", sentence)
        if HEDGE_RE.search(sentence[: first.start() if first else len(sentence)]) or (
            spans and HEDGE_RE.search(sentence[: spans[-1].start()])
        ):
            return None  # "So if $a>0$, $x=5$"
    if spans and (is_m is None or spans[-1].start() >= is_m.end()):
        run = [spans[-1]]
        for prev in reversed(spans[:-1]):
            if (is_m is not None and prev.start() < is_m.end()) or not re.fullmatch(
                r"\s*,?\s*(?:and|or)?\s*", sentence[prev.end() : run[0].start()]
            ):
                break
            run.insert(0, prev)
        listed = _assigned_list(run)
        if listed is not None:
            return listed
        run = run[-1:]
        span = spans[-1]
        after_verb = next((x for x in spans if is_m is not None and x.start() >= is_m.end()), None)
        gap = sentence[is_m.end() : after_verb.start()].strip() if after_verb is not None else None
        if gap is not None and (not gap or _ADVERB_RE.fullmatch(gap)):  # "is $10$", "is clearly $10$"
            return _value(sentence[is_m.end() :], equation_rhs=True)  # "… is $10$, attained when $x = 2$"
        expr = _span_text(span)
        if denied_after(sentence[span.end() :]):
            return None  # "So $n = 34$ is the largest, and $n = 35$ fails."
        if _TOP_EQ_RE.search(expr):
            return rhs(expr)
        return sole_value(sentence) if connector and parts is None else None
    if is_m is not None:
        val = _value(sentence[is_m.end() :], equation_rhs=True)
        if val and (re.search(r"\d", val) or _CHOICE_RE.fullmatch(val)) and len(val) <= 60:  # "the rope is 20 cm"
            return val
    # "Therefore, Tom has 7 apples left.": no asserting verb, one value
    return sole_value(sentence) if connector and parts is None else None


def _assigned_list(run: list[re.Match], labelled_only: bool = False) -> str | None:
    """Several math spans that are all assignments (`$x = 3$ and $y = -2$`, `$k=-1$ or $k=-9$`) as one list: labels
    kept when they differ (matched label by label later), the values alone for one repeated label; else None."""
    items = [x for m in run for x in top_split(_span_text(m), _COMMA_RE) if x]
    labels = [x.split("=")[0].strip() for x in items if "=" in x]
    if (
        len(run) < 2
        or not all(_ASSIGNED_RE.fullmatch(x) for x in items)
        or (labelled_only and len(labels) < len(items))
    ):
        return None  # after an answer marker, "$5$ or $6$" are alternatives, not a list
    if len(labels) == len(items) and len(set(labels)) == len(labels):
        return ", ".join(re.sub(r"\s+", " ", x.strip()) for x in items)
    return ", ".join(rhs(x) for x in items)


# A span's assignments are split at top-level commas only (`a=2, h=-1`), not at `;` or `\quad` as `top_items` splits:
# such a span stays one item, which `_ASSIGNED_RE` refuses.
_COMMA_RE = re.compile(",")
_ASSIGNED_RE = re.compile(r"\s*(?:[A-Za-z](?:_\{?\w+\}?)?\s*=\s*)?[-+\d.,/\\{}\s^()]*?[\d}]\s*")


def _span_text(m: re.Match) -> str:
    return next(g for g in m.groups() if g is not None)


_MATRIX_RE = re.compile(r"\\begin\{[pbvBV]?matrix\}")
_ENV_RE = re.compile(r"\\(?:begin|end)\{(?:aligned|align|gathered|gather|split|array|eqnarray)\*?\}(?:\{[^{}]*\})?")


def _last_row(display: str) -> str:
    """The last row of a displayed expression (`aligned` environments and `\\\\` rows), without `&`, `\\tag{}` and
    closing punctuation."""
    if _MATRIX_RE.search(display):  # a matrix's row breaks and `&` are its rows and columns, not an alignment
        return display.strip().rstrip(".,; ").strip()
    expr = re.sub(r"\\tag\{[^{}]*\}", "", _ENV_RE.sub("", display)).replace("&", "")
    rows = [r for r in expr.split("\\\\") if r.strip()]
    return rows[-1].strip().rstrip(".,; ").strip() if rows else ""
