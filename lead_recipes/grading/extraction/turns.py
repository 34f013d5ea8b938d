"""Where a response stops being the answer: the first turn marker (a chat template's special token, a role label
at the start of a line), or the first echo of the prompt or few-shot `Q:` line after an answer. A policy that fails
to stop, or a base model, writes on into a new turn; both extraction policies read only the text before it.
See docs/grading.md#turn-markers.
"""

from __future__ import annotations

import functools
import re

# The chat templates' turn tokens of the recipes' models and the common ones beyond them, then role labels that
# open a new turn when they start a line.
TURN_TOKENS = (
    "<|im_start|>",  # Qwen2.5 / Qwen3
    "<|im_end|>",
    "<|endoftext|>",
    "<｜User｜>",  # DeepSeek-R1-Distill (full-width bars)
    "<｜Assistant｜>",
    "<｜end▁of▁sentence｜>",
    "<｜begin▁of▁sentence｜>",
    "<|start_header_id|>",  # Llama 3
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|begin_of_text|>",
)
TURN_LABELS = ("Human:", "User:", "Assistant:", "### Instruction", "### Human", "### User")
# A few-shot prompt's question label: a new turn only after an answer (a response may open by restating `Q:`).
QUESTION_LABEL = "Q:"
ECHO_CHARS = 300  # a prompt echo repeats the problem whole, or its opening this long when longer …
_MIN_ECHO_CHARS = 20  # … and a problem shorter than this is never looked for

_TURN_RE = re.compile(
    "|".join(re.escape(t) for t in TURN_TOKENS)
    + r"|(?:^|\n)[ \t]*(?:"
    + "|".join(re.escape(label) for label in TURN_LABELS)
    + ")"
)
# The same labels for `cut_turn`, which scans for the tokens with `str.find`: a pattern that starts with a literal
# `\n` is scanned fast, where the alternation above costs ~0.1 ms per response.
_LABEL_RE = re.compile(r"\n[ \t]*(?:" + "|".join(re.escape(label) for label in TURN_LABELS) + ")")
_SPACE_RE = re.compile(r"\s+")


def _echo_key(problem: str) -> str | None:
    """The problem text an echo repeats (one character over `ECHO_CHARS` when cut there): the longest piece between
    turn markers (a templated prompt holds the system text and role tokens too), whitespace collapsed; None when it
    is too short to tell."""
    pieces = [_SPACE_RE.sub(" ", p).strip() for p in _TURN_RE.split(problem)]
    piece = max(pieces, key=len, default="")
    for label in ("user", "assistant", "system"):  # `<|im_start|>user\n…`: the role name after the token
        if piece.lower().startswith(label + " "):
            piece = piece[len(label) + 1 :]
    return piece[: ECHO_CHARS + 1] if len(piece) >= _MIN_ECHO_CHARS else None


def cut_turn(text: str) -> str:
    """`text` up to its first turn marker."""
    end = len(text)
    if "<" in text:
        for token in TURN_TOKENS:
            i = text.find(token, 0, end)
            end = i if i >= 0 else end
    m = _LABEL_RE.search("\n" + text[:end])  # the leading newline: a label opening the text
    return text[: m.start()] if m else text[:end]


def echo_starts(text: str, problem: str | None) -> list[int]:
    """Where `text` repeats `problem` (whole, or its first `ECHO_CHARS` characters) at the start of a line after
    other text, in order; the first of them after which an answer has been given ends the response
    (`answers.extract_final_answer`). A step that quotes part of the problem ("2. Carla spent two-fifths …") is none."""
    echo = _echo_pattern(problem) if problem else None
    if echo is None:
        return []
    return [e.start() for e in echo.finditer(text) if text[: e.start()].strip()]


_QUESTION_RE = re.compile(r"(?<=\n)[ \t]*" + re.escape(QUESTION_LABEL))


def question_starts(text: str) -> list[int]:
    """Where a line opens with `QUESTION_LABEL` after other text, in order: like an echo, the first after which an
    answer has been given ends the response (a few-shot run-on: `A: 18`, then `Q: What is 2+2?`, `A: 4`)."""
    return [m.start() for m in _QUESTION_RE.finditer(text) if text[: m.start()].strip()]


@functools.lru_cache(maxsize=1024)
def _echo_pattern(problem: str) -> re.Pattern | None:
    """The compiled echo of `problem` (a policy's samples share their prompt: compiled once per prompt)."""
    key = _echo_key(problem)
    if not key:
        return None
    words = key.split(" ")[:-1] if len(key) > ECHO_CHARS else key.split(" ")  # a cut key's last word may be cut
    return re.compile(r"(?<=\n)[ \t]*" + r"\s+".join(re.escape(w) for w in words))
