"""The trade-off benchmark's own logic (benchmarks/tradeoff.py; docs/benchmarks.md#design): its
task is graded as built, its tagger reads behaviour and waste from the text, the training-side breakdown measures
what an advantage pays for, and its length knobs come from the reference recipes. The sweep itself is a benchmark,
not a test."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import tradeoff
from tradeoff_report import advantage_breakdown


class Words:
    """A whitespace tokenizer: one token per word, enough to count the words the tagger calls waste."""

    def __call__(self, text, add_special_tokens=False):
        return type("Enc", (), {"input_ids": text.split()})()


def test_every_built_response_is_graded_as_its_sum_says_and_a_wrong_sum_stays_wrong():
    from lead_recipes.reward.reward_func import grade_samples

    rng = random.Random(0)
    texts, labels, expected = [], [], []
    for _ in range(40):
        d = tradeoff.draw(rng)
        for behaviour in ("steps", "direct"):
            texts.append(tradeoff.response(rng, d, behaviour, rng.randint(0, tradeoff.FILLER_MAX)))
            labels.append(str(sum(d)))
            expected.append(1.0)
            texts.append(tradeoff.response(rng, d, behaviour, 3))
            labels.append(str(sum(d) + 1))
            expected.append(0.0)
    rewards, _ = grade_samples(texts, [""] * len(texts), labels)
    assert list(rewards) == expected


@pytest.mark.parametrize(
    "text,behaviour,waste",
    [
        ("3+4=7 7+5=12 12+6=18 \\boxed{18}", "steps", 0),
        ("3+4=7 7+5=12 12+6=18 \\boxed{18} hmm so well", "steps", 3),
        ("\\boxed{18} okay wait", "direct", 2),
        ("\\boxed{18}", "direct", 0),
        ("hmm \\boxed{18} so", "other", 1),
        ("hmm so well", "other", 3),  # no box: everything is waste
        ("\\boxed{17} 3+4=7 \\boxed{18} now", "direct", 1),  # waste counts after the last box
    ],
)
def test_tag_reads_the_behaviour_from_the_opening_and_the_waste_after_the_last_box(text, behaviour, waste):
    assert tradeoff.tag(text, Words()) == (behaviour, waste)


def sample(group, behaviour, waste, adv, correct=True):
    core = 27 if behaviour == "steps" else 7
    return {
        "group": group,
        "behaviour": behaviour,
        "waste": waste,
        "length": core + waste,
        "adv": adv,
        "correct": correct,
    }


def test_breakdown_sees_a_method_that_pays_steps_and_punishes_waste():
    batch = [sample("q", "steps", w, 1.0 - 0.05 * w) for w in (0, 5, 10, 20)]
    batch += [sample("q", "direct", w, -1.0 - 0.05 * w, correct=False) for w in (0, 10)]
    got = advantage_breakdown([batch])
    assert got["adv_steps_minus_direct"] > 1.5
    assert got["corr_waste"] == pytest.approx(-1.0)
    assert got["unsolved_groups"] == 0 and got["corr_len_unsolved"] is None


def test_breakdown_reports_no_waste_signal_for_a_correctness_only_advantage():
    batch = [sample("q", "steps", w, 0.5) for w in (0, 5, 10, 20)]
    batch += [sample("q", "direct", w, -0.5, correct=False) for w in (3, 9)]
    got = advantage_breakdown([batch])
    assert got["corr_waste"] is None  # equal advantages within each behaviour: no correlation to report


def test_breakdown_measures_the_length_signal_inside_all_wrong_groups():
    batch = [sample("u", "direct", w, 0.01 * (7 + w), correct=False) for w in (0, 4, 8, 30)]
    got = advantage_breakdown([batch])
    assert got["unsolved_groups"] == 1 and got["corr_len_unsolved"] == pytest.approx(1.0)


def test_length_knobs_keep_each_reference_recipes_fraction_of_the_cap():
    flags = {name: dict(zip(f[::2], f[1::2])) for name, (_, f) in tradeoff.configs(30).items()}
    cap = tradeoff.CAP
    assert flags["lead"]["--recipe.lead.l_min"] == str(round(1000 / 4000 * cap))  # lead-1.5b
    assert flags["lead"]["--recipe.lead.b_max"] == str(cap)
    assert flags["leash"]["--recipe.leash.target_length"] == str(round(4096 / 16384 * cap))  # leash-1.5b
    assert flags["gdpo"]["--recipe.gdpo.length_threshold"] == str(round(2000 / 4000 * cap))  # gdpo-1.5b
    assert float(flags["shorter-better"]["--recipe.shorter_better.beta"]) == pytest.approx(0.001 * 6000 / cap)
    assert int(flags["leash-low"]["--recipe.leash.target_length"]) < 27  # below the steps behaviour's length
    assert flags["thinkprune"]["--recipe.thinkprune.limit"] == str(round(2000 / 4000 * cap))  # its last round
