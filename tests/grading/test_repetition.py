"""GRPO-LEAD's repetition detector (arXiv 2504.09696, §3.4, and its authors' code): ≥ 10 aligned repeats of an n-gram
with n ≤ 30, or a token of
≥ 120 characters; run on response text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lead_recipes.grading.repetition import is_repetitive, laser_repetition_start, longest_chunk_run


def words(n, prefix="w"):
    return [f"{prefix}{i}" for i in range(n)]


def test_ten_repeats_of_a_phrase_are_repetitive_and_nine_are_not():
    phrase = "so the answer is maybe".split()
    assert is_repetitive(" ".join(phrase * 10))
    assert not is_repetitive(" ".join(phrase * 9))


def test_repeated_single_word_is_repetitive():
    assert is_repetitive("wait " * 10) and not is_repetitive("wait " * 9)


def test_thirty_word_period_is_caught_but_thirty_one_is_not():
    assert is_repetitive(" ".join(words(30) * 10))
    assert not is_repetitive(" ".join(words(31) * 10))


def test_loop_starting_at_any_offset_is_caught():
    assert is_repetitive("let me think . " + " ".join(["x", "y"] * 12))
    assert is_repetitive(" ".join(words(3, "a") + words(4, "b") * 11))


def test_token_of_120_characters_is_repetitive_and_119_is_not():
    assert is_repetitive("ok " + "a" * 120)
    assert not is_repetitive("ok " + "a" * 119)


def test_empty_and_whitespace_text_is_not_repetitive():
    assert not is_repetitive("") and not is_repetitive("   \n\t ")


def test_ordinary_solution_is_not_repetitive():
    text = (
        "We compute 3 + 4 = 7. Then 7 * 2 = 14, so the total is 14. Checking: 14 / 2 = 7, which matches. "
        "Therefore the final answer is \\boxed{14}."
    )
    assert not is_repetitive(text)


def test_longest_chunk_run_ignores_a_trailing_partial_chunk():
    assert longest_chunk_run(["a", "b", "a", "b", "a"], 2) == 2
    assert longest_chunk_run([], 3) == 0


@settings(max_examples=50, deadline=None)
@given(
    vocab=st.lists(st.text("abcdefgh", min_size=1, max_size=6), min_size=1, max_size=30, unique=True),
    reps=st.integers(10, 15),
    head=st.lists(st.text("xyz", min_size=1, max_size=4), max_size=5),
)
def test_any_periodic_loop_of_period_at_most_30_with_enough_repeats_is_caught(vocab, reps, head):
    # a loop of period p repeated ≥ 10 + 1 times after any prefix still has ≥ 10 aligned repeats at n = p
    text = " ".join(head + vocab * (reps + 1))
    assert is_repetitive(text)


def _reference(text: str) -> bool:
    ws = text.split()
    return bool(ws) and (max(map(len, ws)) >= 120 or any(longest_chunk_run(ws, n) >= 10 for n in range(1, 31)))


@settings(max_examples=200, deadline=None)
@given(
    words_=st.lists(st.sampled_from(["a", "b", "c", "ab", "\\boxed{1}"]), max_size=400),
    period=st.integers(1, 35),
    reps=st.integers(0, 14),
    cut=st.integers(0, 40),
)
def test_fast_detector_agrees_with_the_plain_python_rule(words_, period, reps, cut):
    loop = (words_[:period] or ["z"]) * reps
    text = " ".join(words_[:cut] + loop + words_[cut:])
    assert is_repetitive(text) == _reference(text)


# Laser's token n-gram detector (Laser-DE's optional guard; the 2026 baselines spec §2.6)
def test_laser_detector_flags_a_four_token_loop_from_its_start_as_the_spec_executed():
    ids = list(range(1000, 2088)) + [7, 8, 9, 10] * 3  # 1100 tokens, the last 12 a loop
    assert laser_repetition_start(ids) == 1088


def test_laser_detector_passes_a_response_without_repeats():
    assert laser_repetition_start(list(range(1100))) == 1100
    assert laser_repetition_start([5] * 8) == 8  # 8 tokens or fewer are never flagged


def test_laser_detector_flags_a_repeated_2n_gram_however_far_apart():
    # 300 tokens: its 4-grams occur at most twice (the threshold is 3), but the 8-gram at 10 recurs at 250
    ids = list(range(1000, 1300))
    ids[250:258] = ids[10:18]
    assert laser_repetition_start(ids) == 10


def test_laser_detector_skips_a_one_token_run_unless_its_n_is_2():
    assert laser_repetition_start(list(range(100, 140)) + [3] * 4) == 44  # n = 3: the run of 3s is no 3-gram
    assert laser_repetition_start(list(range(100, 120)) + [3] * 3) == 20  # 23 tokens, n = 2: (3, 3) twice
