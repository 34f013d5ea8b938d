"""Module-scoped fixtures of the CPU end-to-end tests: the fixture model, built once and cached, and a Ray cluster
with fake GPUs, stopped by its own PIDs. See docs/e2e.md."""

from __future__ import annotations

import pytest
from cpu_e2e import harness


@pytest.fixture(scope="module")
def model():
    return harness.fixture_model()


@pytest.fixture(scope="module")
def cluster():
    c = harness.RayCluster()
    yield c
    c.stop()
    assert not c.pids(), "processes of the test's Ray cluster survived its stop"
