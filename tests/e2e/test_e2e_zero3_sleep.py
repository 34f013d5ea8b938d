"""ZeRO-3 with DeepSpeed sleep (lead-7b, grpo-lead-7b, leash-4b) through the real `lead-recipes train` loop on CPU:
DeepSpeed's state offload needs its FusedAdam, so this module's cluster keeps it (E2E_FUSED_ADAM=1: the shim's P3
off), a C++ extension JIT-built once per machine into the e2e cache (minutes: e2e_full, not CI). See
docs/e2e.md#what-each-run-proves."""

from __future__ import annotations

import pytest
from cpu_e2e import harness
from cpu_e2e.checks import advantage_mismatches

pytestmark = [
    pytest.mark.e2e_full,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(harness.available() is not None, reason=str(harness.available())),
]
P = harness.gpu_smoke.PROFILES["cpu"]
PER_STEP, N, CAP = P["rollout_batch"] * P["n"], P["n"], P["max_new_tokens"]


@pytest.fixture(scope="module")
def cluster():
    """This module's own cluster (conftest's trains with torch's Adam): its workers inherit E2E_FUSED_ADAM."""
    c = harness.RayCluster(E2E_FUSED_ADAM="1")
    yield c
    c.stop()
    assert not c.pids(), "processes of the test's Ray cluster survived its stop"


def test_zero3_with_deepspeed_sleep_offloads_between_steps_and_trains_on_the_methods_advantage(
    cluster, model, tmp_path
):
    """lead, 2 steps, --ds.zero_stage 3 --ds.enable_sleep: the actor's states are offloaded at start and reloaded
    and offloaded around each step (OpenRLHF's reload_states/offload_states; with torch's Adam the first offload
    fails at actor start, so a pass means it ran), and each sample trained on the method's advantage."""
    run = harness.Run(
        cluster, model, tmp_path / "lead-zero3-sleep", "lead", 1, path="zero3", extra=["--ds.enable_sleep"]
    )
    assert run.wait(timeout=1500) == 0, run.tail()
    print(f"zero3 + sleep: lead, 2 steps, {run.wall_s:.0f} s wall")
    assert (
        advantage_mismatches(
            run, [*harness.gpu_smoke.method_flags("lead", CAP), "--recipe.method", "lead"], 1, N, CAP, PER_STEP
        )
        == []
    )
    assert run.recipe_state(2)["method"] == "lead"
