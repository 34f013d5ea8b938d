"""GRPO-LEAD's repetition detector (the authors' code, `deepscaler/rewards/math_reward.py`), on response text only:
`is_repetitive` (numpy over exact word ids) and `longest_chunk_run`, the plain-Python rule it is tested against.
See docs/methods.md#repetition-detector.
"""

from __future__ import annotations

import numpy as np

MAX_N = 30
MIN_REPEATS = 10
MAX_TOKEN_CHARS = 120


def longest_chunk_run(words: list[str], n: int) -> int:
    """Longest run of identical adjacent n-word chunks, chunks cut at offsets 0, n, 2n, … (a trailing partial
    chunk is ignored)."""
    n_chunks = len(words) // n
    best = 1 if n_chunks else 0
    run = 1
    for c in range(1, n_chunks):
        if words[c * n : (c + 1) * n] == words[(c - 1) * n : c * n]:
            run += 1
            best = max(best, run)
        else:
            run = 1
    return best


def is_repetitive(
    text: str, max_n: int = MAX_N, min_repeats: int = MIN_REPEATS, max_token_chars: int = MAX_TOKEN_CHARS
) -> bool:
    """True when `text` (a response, not prompt+response) loops; see the module docstring. Same answer as
    `any(longest_chunk_run(text.split(), n) >= min_repeats for n in 1..max_n)` or a long token."""
    words = text.split()
    if not words:
        return False
    if max(map(len, words)) >= max_token_chars or min_repeats <= 1:
        return True
    vocab: dict[str, int] = {}
    ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.int64, count=len(words))
    need = min_repeats - 1  # min_repeats equal chunks in a row = min_repeats − 1 equal adjacent pairs
    for n in range(1, max_n + 1):
        m = len(ids) // n  # whole chunks at offsets 0, n, 2n, …
        if m < min_repeats:
            break
        chunks = ids[: m * n].reshape(m, n)
        same = (chunks[1:] == chunks[:-1]).all(axis=1)
        if same.sum() < need:
            continue
        run = np.concatenate(([0], np.cumsum(same)))
        if (run[need:] - run[:-need]).max() >= need:
            return True
    return False
