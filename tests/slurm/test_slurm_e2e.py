"""The real `lead-recipes train` (OpenRLHF's whole Ray loop on CPU, through tests/cpu_e2e's shim and tiny model)
inside slurm/train.sbatch on the real Slurm of tests/slurm/conftest.py: the script starts Ray with 4 fake GPUs,
USR1 to the batch script makes the running trainer save at its next step boundary, the job requeues, and the requeued
run resumes from that checkpoint and finishes. Minutes on this machine: behind the e2e_full marker.

Not shown: several nodes (the trainer's placement groups on one Ray node), a reward server (the reward function runs
in the rollout actors here), real GPUs."""

from __future__ import annotations

import os
import re

import pytest
from cpu_e2e import harness
from support.slurm_helpers import (
    DONE,
    VENV_BIN,
    out_of,
    release_requeued,
    scancel,
    submit_stand_in,
    train_log,
    wait_for,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e_full,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(harness.available() is not None, reason=str(harness.available())),
]


def test_real_trainer_checkpoints_on_usr1_requeues_and_the_requeued_run_resumes_and_finishes(slurm, tmp_path):
    model = harness.fixture_model()
    run_dir = slurm.root_tmp / "e2e"
    run_dir.mkdir()
    data = run_dir / "prompts.jsonl"
    harness.gpu_smoke.write_data(str(data), "cpu")
    argv = harness.gpu_smoke.train_argv(
        "cpu",
        "grpo-lead",
        str(model),
        str(data),
        str(run_dir),
        str(harness.ROOT / "lead_recipes" / "reward" / "reward_func.py"),
        3,
        extra=["--preflight.skip", "gpu", "--ckpt.max_num", "100"],
    )
    assert argv[argv.index("--ckpt.path") + 1] == str(run_dir / "ckpt")
    at = argv.index("--ckpt.path")
    # only what the shim adds (PYTHONPATH, DS_ACCELERATOR, ...): PATH and TMPDIR stay the cluster's
    env = {k: v for k, v in harness.shim_env(WANDB_DIR=str(tmp_path)).items() if os.environ.get(k) != v}
    job = submit_stand_in(
        slurm,
        run_dir,
        VENV_BIN / "lead-recipes",
        *argv[:at],
        *argv[at + 2 :],
        sbatch=("--cpus-per-task=2", "--time=60"),
        env=env,
        script=("--slurm.reward_placement", "none", "--slurm.gpus_per_node", "4", "--slurm.cpus_per_node", "8"),
    )
    # submit_stand_in puts `train --ckpt.path <run>/ckpt` first; the rest of the smoke command follows
    problems = run_dir / "ckpt" / "recipe_problems.jsonl"
    wait_for(
        lambda: (problems.exists() and problems.read_text().strip()) or slurm.job(job)["JobState"] in DONE,
        900,
        "the first training step",
    )
    assert slurm.job(job)["JobState"] == "RUNNING", out_of(run_dir, job)[-3000:] + train_log(run_dir, job)[-3000:]
    scancel(slurm, "--signal=USR1", "--batch", job)
    release_requeued(slurm, job)
    info = slurm.wait_state(job, DONE, timeout=900, restarts=1)
    out, resumed = out_of(run_dir, job), train_log(run_dir, job, 1)
    assert (info["JobState"], info["Restarts"]) == ("COMPLETED", "1"), out[-3000:] + resumed[-3000:]
    saved = re.search(r"trainer saved: .*\"step\": (\d+)", out)
    assert saved, out[-3000:]
    stopped = int(saved.group(1))
    assert f"restored grpo-lead state at global_step {stopped}" in resumed
    assert (run_dir / "ckpt" / "_actor" / "global_step6").is_dir()
