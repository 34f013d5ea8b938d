"""OpenRLHF's length penalty (DAPO overlong; ProRL stop-properly with grpo only) reaches every registered method as
a reward term before its group normalisation (docs/training.md#dapos-overlong-penalty; the plug-in side is
tests/training/test_openrlhf_plugin.py)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.batches import ready

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import REGISTRY, RecipeConfig

CAP = 4000


@st.composite
def batches(draw):
    """[M, G] correctness and lengths, 1..CAP tokens (a length at the cap is a truncated rollout)."""
    m, g = draw(st.integers(1, 4)), draw(st.integers(2, 8))
    correct = draw(st.lists(st.lists(st.booleans(), min_size=g, max_size=g), min_size=m, max_size=m))
    lengths = draw(st.lists(st.lists(st.integers(1, CAP), min_size=g, max_size=g), min_size=m, max_size=m))
    return torch.tensor(correct), torch.tensor(lengths, dtype=torch.float32)


@pytest.mark.parametrize("name", [e.name for e in REGISTRY])
@settings(max_examples=40, deadline=None)
@given(b=batches(), p=st.floats(0.05, 1.0), targets=st.lists(st.integers(100, 4000), min_size=4, max_size=4))
def test_a_length_penalty_on_one_of_two_twin_rollouts_ranks_it_below_its_twin(name, b, p, targets):
    """OpenRLHF's DAPO overlong / stop-properly penalty must reach every method's reward before its group
    normalisation (docs/training.md#dapos-overlong-penalty): rollouts 0 and 1 of prompt 0 are identical, only rollout 0
    is penalised. Every batch carries L1 targets (exact ones) and AdaptThink's fields (both twins thinking), so methods
    that need them run too."""
    c, l = b
    c[0, 1], l[0, 1] = c[0, 0], l[0, 0]
    m = c.shape[0]
    n_gold = torch.tensor(targets[:m], dtype=torch.float32)
    l1_max = torch.zeros(m, dtype=torch.bool)  # exact prompts: data every method accepts
    penalty = torch.zeros(c.shape)
    penalty[0, 0] = -p
    method = ready(build_method(RecipeConfig.of({"method": name})))
    boxed = torch.ones_like(c)  # Laser's format flag: every response well formatted
    fields = dict(answer_boxed=boxed, think_once=boxed, nothink=torch.zeros_like(c), ref_acc=torch.full((m,), 0.5))
    plain = method.step(RolloutBatch(c, l, CAP, n_gold=n_gold, l1_max=l1_max, **fields)).advantages
    assert plain[0, 0] == plain[0, 1]  # twins
    method = ready(build_method(RecipeConfig.of({"method": name})))  # a fresh controller state
    a = method.step(RolloutBatch(c, l, CAP, n_gold=n_gold, l1_max=l1_max, **fields, length_penalty=penalty)).advantages
    assert a[0, 0] < a[0, 1] - 1e-4, (a[0, 0].item(), a[0, 1].item())
