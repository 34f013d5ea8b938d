"""The shipped recipes' GPU paths through the real `lead-recipes train` loop on CPU (tests/cpu_e2e's shim, one Ray
cluster and fixture model for the module, 2 steps each): sample packing with flash_attention_2 (the shim's per-sequence
SDPA stand-in for flash-attn's varlen kernel), dynamic batching over 2 epochs with the step-order actor, ZeRO-3. Each
run's flags come from launchers/gpu_smoke.py's PATHS. What each proves and what cannot run on CPU (vLLM tensor
parallel 2): docs/e2e.md#what-each-run-proves."""

from __future__ import annotations

import pytest
from cpu_e2e import harness
from cpu_e2e.checks import advantage_mismatches

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(harness.available() is not None, reason=str(harness.available())),
]
P = harness.gpu_smoke.PROFILES["cpu"]
PER_STEP, N, CAP = P["rollout_batch"] * P["n"], P["n"], P["max_new_tokens"]


def _argv(method):
    return harness.gpu_smoke.method_flags(method, CAP) + ["--recipe.method", method]


# CPU-only extra flag of the flash-attention paths: the preflight rightly refuses the CPU stub flash_attn_2_cuda
# (the shim's stand-in replaces the kernels, not the check), so these runs skip that check as well as `gpu`
FLASH_ATTN_STUB = ["--preflight.skip", "gpu,flash-attn"]


def _run(cluster, model, tmp_path, method, path, extra=()):
    run = harness.Run(cluster, model, tmp_path / f"{method}-{path}", method, episodes=1, path=path, extra=extra)
    assert run.wait() == 0, run.tail()
    print(f"{path}: {method}, 2 steps, {run.wall_s:.0f} s wall")
    return run


def test_packed_flash_attention_run_trains_on_the_methods_advantage(cluster, model, tmp_path):
    """lead, 2 steps, --ds.packing_samples with flash_attention_2: the actor's forward went through the varlen
    stand-in with several sequences in one call, and each sample trained on the method's advantage."""
    run = _run(cluster, model, tmp_path, "lead", "packing", FLASH_ATTN_STUB)
    rows = run.trained_rows()
    assert len(rows) == 2 * PER_STEP
    assert all(r["varlen"] and r["varlen"]["varlen"] > 0 for r in rows), rows[0]["varlen"]
    assert max(r["varlen"]["most_sequences"] for r in rows) > 1  # packed: several samples per forward
    assert advantage_mismatches(run, _argv("lead"), 1, N, CAP, PER_STEP) == []
