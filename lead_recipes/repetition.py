"""GRPO-LEAD's repetition detector (spec algorithms.md §2.3), on response text only — never on the prompt.

A response is repetitive when, for some n ≤ 30, its whitespace-split words cut into non-overlapping n-word chunks
(aligned at offset 0) contain ≥ 10 identical adjacent chunks, or when one whitespace token has ≥ 120 characters.
Reference: `aeroplanepaper/GRPO-LEAD deepscaler/rewards/math_reward.py` (`max_continuous_ngram`,
`find_largest_word`). Pure string work: no regex backtracking, no eval; O(30 · words).
"""
from __future__ import annotations

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
        if words[c * n:(c + 1) * n] == words[(c - 1) * n:c * n]:
            run += 1
            best = max(best, run)
        else:
            run = 1
    return best


def is_repetitive(text: str, max_n: int = MAX_N, min_repeats: int = MIN_REPEATS,
                  max_token_chars: int = MAX_TOKEN_CHARS) -> bool:
    """True when `text` (a response, not prompt+response) loops; see the module docstring."""
    words = text.split()
    if not words:
        return False
    if max(len(w) for w in words) >= max_token_chars:
        return True
    return any(longest_chunk_run(words, n) >= min_repeats for n in range(1, max_n + 1))
