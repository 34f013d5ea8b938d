"""The rest of the CPU end-to-end matrix (deselected by default; `pytest -m e2e_full tests/e2e/test_e2e_full.py`):
every other method for 2 steps with the trained-advantage read-back, `composed` and the length baselines (laser and
laser-d among them, laser-d with the smoke prompts as its monitor set) with a resume, and the weight-sync control
(vLLM receives but does not load the weights: the |vllm_kl| < 1e-2 check of test_e2e_cpu.py must fail)."""

from __future__ import annotations

import pytest
from cpu_e2e import harness
from cpu_e2e.checks import advantage_mismatches, problem_record_counts

pytestmark = [
    pytest.mark.e2e_full,
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(harness.available() is not None, reason=str(harness.available())),
]
P = harness.gpu_smoke.PROFILES["cpu"]
PER_STEP, N, CAP = P["rollout_batch"] * P["n"], P["n"], P["max_new_tokens"]


def _argv(method):
    return harness.gpu_smoke.method_flags(method, CAP) + ["--recipe.method", method]


@pytest.mark.parametrize("method", ["grpo", "grpo-scalarized", "gdpo", "shorter-better"])
def test_trained_advantage_equals_the_methods_advantage(method, cluster, model, tmp_path):
    run = harness.Run(cluster, model, tmp_path / method, method, episodes=1)
    assert run.wait() == 0, run.tail()
    assert advantage_mismatches(run, _argv(method), 1, N, CAP, PER_STEP) == []
    assert run.recipe_state(2)["method"] == method


def test_composed_trains_two_steps_and_resumes(cluster, model, tmp_path):
    run = harness.Run(cluster, model, tmp_path / "composed", "composed", episodes=1)
    assert run.wait() == 0, run.tail()
    assert advantage_mismatches(run, _argv("composed"), 1, N, CAP, PER_STEP) == []
    resumed = harness.Run(
        cluster, model, run.dir, "composed", episodes=2, extra=["--ckpt.load_enable"], log_name="resume.log"
    )
    assert resumed.wait() == 0, resumed.tail()
    assert "restored composed state at global_step 2" in resumed.text()
    assert advantage_mismatches(resumed, _argv("composed"), 3, N, CAP, PER_STEP) == []
    assert set(problem_record_counts(run.ckpt).values()) == {1}


BASELINES = ["arora-zanette", "l1-exact", "l1-max", "kimi", "thinkprune", "dler", "laser", "laser-d"]


@pytest.mark.parametrize("method", BASELINES)
def test_length_baseline_trains_two_steps_and_resumes(method, cluster, model, tmp_path):
    extra = []
    if method.startswith("l1-"):
        data = tmp_path / "l1-prompts.jsonl"  # the CPU smoke prompts with L1's suffix and target (n_gold, l1_mode)
        harness.gpu_smoke.write_data(str(data), "cpu", method)
        extra = ["--data.prompt_dataset", str(data)]
    run = harness.Run(cluster, model, tmp_path / method, method, episodes=1, extra=extra)
    assert run.wait() == 0, run.tail()
    assert advantage_mismatches(run, _argv(method), 1, N, CAP, PER_STEP) == []
    resumed = harness.Run(
        cluster, model, run.dir, method, episodes=2, extra=["--ckpt.load_enable", *extra], log_name="resume.log"
    )
    assert resumed.wait() == 0, resumed.tail()
    assert f"restored {method} state at global_step 2" in resumed.text()
    assert advantage_mismatches(resumed, _argv(method), 3, N, CAP, PER_STEP) == []
    if method == "kimi":  # its step counter went on from the checkpoint, not from 0
        assert run.recipe_state(2)["controller"] == {"step": 2} and resumed.recipe_state(4)["controller"] == {"step": 4}


def test_without_the_weight_sync_vllm_kl_fails_the_check(model, tmp_path):
    cluster = harness.RayCluster(E2E_SYNC_OFF="1")
    try:
        run = harness.Run(cluster, model, tmp_path / "sync-off", "lead", episodes=2)
        assert run.wait() == 0, run.tail()
        checked = harness.gpu_smoke.vllm_kl_after_gradient_steps(run.scalars())
        assert checked and any(abs(v) >= 1e-2 for v in checked.values()), checked  # the CI check would fail
    finally:
        cluster.stop()
