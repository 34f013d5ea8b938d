"""Laser-D and Laser-DE (docs/methods.md#equations-laser-d-laser-de) through `build_method`: the 2026 baselines spec's
golden trajectory G-L2 (monitor passes before step 1 and after steps 20 and 40, training batches at steps 1, 21 and
41: rewards 1e-6, advantages 1e-5, the targets as the code prints them, the controller state after the step-40
monitor) and the guard group G-L3; a step before any monitor is refused, and a restored state continues exactly."""

from __future__ import annotations

import json

import pytest
import torch
from test_methods_laser import MONITORS

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig


def method(name, **section):
    key = name.replace("-", "_")
    return build_method(RecipeConfig.of({"method": name, key: {"grid_lower": 1024, **section}}))


def batch(groups, repetitive=None):
    """A RolloutBatch from Laser's base scores s (1: correct, −0.5: wrong, −1: format failure) and lengths."""
    s = torch.tensor([g[0] for g in groups], dtype=torch.float64)
    return RolloutBatch(
        s == 1,
        torch.tensor([g[1] for g in groups], dtype=torch.float32),
        16384,
        answer_boxed=s > -1,
        repetitive=None if repetitive is None else torch.tensor(repetitive),
    )


STEP_1 = batch(
    [
        ([1] * 7 + [-0.5], [2000, 2500, 3072, 3073, 4000, 5000, 6000, 7000]),  # 7/8 ⇒ high, L_T 3072 inclusive
        ([1, 1] + [-0.5] * 4 + [-1, -1], [9000, 12000, 5000, 8000, 10000, 15000, 16384, 16384]),  # 2/8 ⇒ low
    ]
)
STEP_21 = batch(
    [
        ([1] * 4 + [-0.5] * 3 + [-1], [3000, 6144, 6145, 9000, 2000, 7000, 12000, 14000]),  # 4/8 ⇒ medium
        ([1] + [-0.5] * 5 + [-1, -1], [13000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]),  # 1/8 ⇒ low: no target
    ]
)
STEP_41_G1 = ([1, 1, 1] + [-0.5] * 4 + [-1], [2000, 3072, 4000, 1000, 2500, 3500, 5000, 6000])  # 3/8 ⇒ medium
STEP_41 = batch([([1] * 8, [800, 1000, 1024, 1025, 1500, 2000, 2500, 3000]), STEP_41_G1])  # g0 8/8 ⇒ high

# (step, batch, targets as the code prints them = min(L*, batch max), Laser-D (R, A), Laser-DE (R, A)) per group
GOLDEN = [
    (
        1,
        STEP_1,
        (16384, 6144, 3072),
        [
            ([1.5, 1.5, 1.5, 1, 1, 1, 1, -0.5], [0.763761] * 3 + [0] * 4 + [-2.291284]),
            ([1.5, 1.5] + [-0.5] * 4 + [-1, -1], [1.583146] * 2 + [-0.365341] * 4 + [-0.852463] * 2),
        ],
        [
            ([1.5, 1.5, 1.5, 1, 1, 1, 1, 0], [0.882917] * 3 + [-0.126131] * 4 + [-2.144227]),
            ([1.5, 1.5] + [-0.5] * 4 + [-1, -1], [1.583146] * 2 + [-0.365341] * 4 + [-0.852463] * 2),
        ],
    ),
    (
        21,
        STEP_21,
        (14000, 6144, 2048),
        [
            ([1.5, 1.5, 1, 1, -0.5, -0.5, -0.5, -1], [1.14963] * 2 + [0.665576] * 2 + [-0.786589] * 3 + [-1.270644]),
            ([1.5] + [-0.5] * 5 + [-1, -1], [2.371705] + [-0.158114] * 5 + [-0.790568] * 2),
        ],
        [
            (
                [1.5, 1.5, 1, 1, -0.5, 0, 0, -1],
                [1.127265] * 2 + [0.596787] * 2 + [-0.994645] + [-0.464168] * 2 + [-1.525123],
            ),
            ([1.5] + [-0.5] * 5 + [-1, -1], [2.371705] + [-0.158114] * 5 + [-0.790568] * 2),
        ],
    ),
    (
        41,
        STEP_41,
        (6000, 3072, 1024),
        [
            ([1.5] * 3 + [1] * 5, [1.20761] * 3 + [-0.724566] * 5),
            ([1.5, 1.5, 1] + [-0.5] * 4 + [-1], [1.339585] * 2 + [0.852463] + [-0.608902] * 4 + [-1.096024]),
        ],
        [
            ([1.5] * 3 + [1] * 5, [1.20761] * 3 + [-0.724566] * 5),
            (
                [1.5, 1.5, 1, -0.5, -0.5, 0, 0, -1],
                [1.297185] * 2 + [0.778311] + [-0.778311] * 2 + [-0.259437] * 2 + [-1.297185],
            ),
        ],
    ),
]


def trajectory(name):
    """G-L2 through the method: monitor, step 1 (and steps 2-20 on the same batch), monitor, step 21 (…40),
    monitor, step 41. Yields (golden row, output) at steps 1, 21 and 41; the method last."""
    m = method(name)
    for (passes, _), (step, b, *_rest) in zip(MONITORS, GOLDEN):
        m.observe_monitor(*passes, step=step - 1)
        if step == 41:
            saved = json.loads(json.dumps(m.state_dict()))
        out = m.step(b)
        if step < 41:
            for _ in range(19):  # steps 2-20 and 22-40: no monitor, so the targets stay
                m.step(b)
        yield (step, b, *_rest), out, saved if step == 41 else None


@pytest.mark.parametrize("name,column", [("laser-d", 3), ("laser-de", 4)])
def test_g_l2_trajectory_gives_the_authors_rewards_advantages_and_printed_targets(name, column):
    for row, out, _ in trajectory(name):
        for q, (rewards, advantages) in enumerate(row[column]):
            assert out.rewards[q].tolist() == pytest.approx(rewards, abs=1e-6), (row[0], q)
            assert out.advantages[q].tolist() == pytest.approx(advantages, abs=1e-5), (row[0], q)
        printed = tuple(out.stats[f"target_{b}"] for b in ("low", "medium", "high"))
        assert printed == row[2], row[0]


def test_g_l2_controller_state_after_the_step_40_monitor_is_the_specs():
    *_, (_, _, saved) = trajectory("laser-d")
    assert saved == {"targets": {"low": 9216, "medium": 3072, "high": 1024}, "last_monitor_step": 40, "step": 40}


def test_a_restored_state_shapes_the_next_batch_as_the_uninterrupted_run():
    *_, (_, uninterrupted, saved) = trajectory("laser-de")
    resumed = method("laser-de")
    resumed.load_state_dict(saved)
    out = resumed.step(STEP_41)
    assert torch.equal(out.rewards, uninterrupted.rewards) and torch.equal(out.advantages, uninterrupted.advantages)


def test_g_l3_the_guard_withholds_the_bonus_only_when_enabled():
    # step-41 g1 with rollout 6 (wrong, 5000 tokens > L_T 3072) a token loop
    b = batch([STEP_41_G1], repetitive=[[False] * 6 + [True, False]])
    for guard, rewards, advantages in (
        (
            False,
            [1.5, 1.5, 1, -0.5, -0.5, 0, 0, -1],
            [1.297185] * 2 + [0.778311] + [-0.778311] * 2 + [-0.259437] * 2 + [-1.297185],
        ),
        (
            True,
            [1.5, 1.5, 1, -0.5, -0.5, 0, -0.5, -1],
            [1.315438] * 2 + [0.814319, -0.689039, -0.689039, -0.18792, -0.689039, -1.190158],
        ),
    ):
        m = method("laser-de", repetition_guard_enable=guard)
        m.observe_monitor(*MONITORS[2][0], step=40)
        out = m.step(b)
        assert out.rewards[0].tolist() == pytest.approx(rewards, abs=1e-6), guard
        assert out.advantages[0].tolist() == pytest.approx(advantages, abs=1e-5), guard


def test_the_guard_without_repetition_flags_is_refused_by_name():
    m = method("laser-de", repetition_guard_enable=True)
    m.observe_monitor(*MONITORS[2][0])
    with pytest.raises(ValueError, match="repetition_guard_enable needs per-rollout repetition flags"):
        m.step(batch([STEP_41_G1]))


@pytest.mark.parametrize("name", ["laser-d", "laser-de"])
def test_a_step_before_any_monitor_is_refused_not_given_the_codes_8192(name):
    with pytest.raises(ValueError, match="no monitor pass has run.*8192"):
        method(name).step(STEP_1)


def test_a_state_saved_before_any_monitor_still_refuses_a_step():
    m = method("laser-d")
    m.load_state_dict(method("laser-d").state_dict())
    with pytest.raises(ValueError, match="no monitor pass has run"):
        m.step(STEP_1)


def test_laser_de_s_exploration_never_reaches_a_format_failure():
    # 4/8 correct ⇒ medium, L_T 6144: the four format failures (s = −1) are longer, and still get no α
    m = method("laser-de")
    m.observe_monitor(*MONITORS[0][0])
    out = m.step(batch([([1] * 4 + [-1] * 4, [1000, 2000, 3000, 4000, 7000, 8000, 9000, 10000])]))
    assert out.rewards[0].tolist() == [1.5] * 4 + [-1.0] * 4 and out.stats["explore_frac"] == 0.0


@pytest.mark.parametrize("name", ["laser-d", "laser-de"])
def test_grid_step_and_upper_set_the_grid_a_monitor_pass_chooses_from(name):
    m = method(name, grid_lower=25, grid_step=6, grid_upper=100)
    assert m.grid == list(range(25, 98, 6))  # 25, 31, …, 97: the scaled grid, not [25, 1024, …]
    # one high-band prompt (8/8 correct, n_b 5): ⌊coverage·5⌋ ≥ 1 needs 2 of the 8 samples ≤ L; 25 holds one, 31
    # two (the fixed grid's next value would be 1024)
    correct = torch.ones(1, 8, dtype=torch.bool)
    lengths = torch.tensor([[20, 26, 30, 32, 33, 50, 60, 99]])
    assert m.observe_monitor(correct, lengths)["high"] == 31


@pytest.mark.parametrize("key", ["laser_d", "laser_de"])
def test_a_grid_upper_below_its_lower_or_a_zero_step_is_refused_by_name(key):
    with pytest.raises(ValueError, match=rf"--recipe\.{key}\.grid_upper must be ≥ --recipe\.{key}\.grid_lower \(25\)"):
        RecipeConfig.of({"method": key.replace("_", "-"), key: {"grid_lower": 25, "grid_upper": 24}})
    with pytest.raises(ValueError, match=rf"--recipe\.{key}\.grid_step"):
        RecipeConfig.of({"method": key.replace("_", "-"), key: {"grid_step": 0}})
