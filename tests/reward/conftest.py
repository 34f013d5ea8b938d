"""Fixtures of the reward tests: the package's reward function loaded by OpenRLHF's own executor, as a run loads it."""

from __future__ import annotations

from pathlib import Path

import pytest

import lead_recipes.reward.reward_func as rf_module


@pytest.fixture(scope="module")
def executor():
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    return SingleTurnAgentExecutor(str(Path(rf_module.__file__)))
