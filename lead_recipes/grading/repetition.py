"""GRPO-LEAD's repetition detector (the authors' code, `deepscaler/rewards/math_reward.py`), on response text only:
`is_repetitive` (numpy over exact word ids) and `longest_chunk_run`, the plain-Python rule it is tested against; and
Laser's token n-gram detector (`laser_repetition_start`, on response token ids), Laser-DE's optional guard.
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


def laser_repetition_start(ids: list[int]) -> int:
    """Where a repetition starts in the token ids `ids`, len(ids) when there is none: Laser's detector
    (hkust-nlp/Laser `compute_unique_tokens.py`; docs/methods.md#equations-laser-d-laser-de), as it behaves on a
    list of ids.
    Nothing is flagged in 8 tokens or fewer. Scanning from the end, an n-gram (n = 2 below 30 tokens, 3 below 100,
    else 4; an n-gram of one repeated token skipped when n > 2) seen `threshold` times (2 below 200 tokens, else 3)
    with two successive occurrences less than len/3 apart flags from its first occurrence; failing that, from 4n
    tokens on, any 2n-gram seen twice flags from the earlier of the two."""
    size = len(ids)
    if size <= 8:
        return size
    n = 2 if size < 30 else 3 if size < 100 else 4
    threshold = 2 if size < 200 else 3
    seen: dict[tuple, list[int]] = {}
    for i in range(size - n, -1, -1):
        gram = tuple(ids[i : i + n])
        if n > 2 and len(set(gram)) == 1:
            continue
        at = seen.setdefault(gram, [])
        at.append(i)
        if len(at) >= threshold:
            ordered = sorted(at)
            if any(b - a < size // 3 for a, b in zip(ordered, ordered[1:])):
                return ordered[0]
    if size >= 4 * n:
        first: dict[tuple, int] = {}
        for i in range(size - 2 * n, -1, -1):
            pattern = tuple(ids[i : i + 2 * n])
            if pattern in first:
                return min(i, first[pattern])
            first[pattern] = i
    return size
