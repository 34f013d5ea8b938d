"""slurm/train.sbatch on the real Slurm of tests/slurm/conftest.py (tasks bound to their cores, fake GPUs): when
a job is requeued, resumed or stopped (time limits, USR1/SIGTERM, grace-time preemption, restart caps, stalled
checkpoints, stale resume marks, bounded save waits), and the site-facing options (setup file, open-files limit,
default time limit, head address and ports, CPUs/GPUs that cannot hold the layout). Each test submits the real script
with the stand-in trainer (no Ray: these paths do not depend on it) and checks one property, named in the test. The
behaviour: docs/slurm.md#what-the-job-does-on-preemption-or-at-the-time-limit; what one machine cannot show:
docs/slurm.md#what-the-tests-cannot-show-on-one-machine."""

from __future__ import annotations

import json
import re
import resource
import socket
import subprocess
import sys

import pytest
from support.slurm_cluster import which
from support.slurm_helpers import (
    DONE,
    commands,
    out_of,
    release_requeued,
    scancel,
    stand_in_trainer,
    submit_stand_in,
    train_log,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def training(run_dir, job, run: int = 0):
    wait_for(lambda: "stand-in trainer: step 2" in train_log(run_dir, job, run), 120, f"run {run} training")


def env_line(run_dir, job) -> dict:
    wait_for(lambda: "stand-in env:" in train_log(run_dir, job), 120, "the stand-in's environment line")
    return json.loads(train_log(run_dir, job).split("stand-in env: ", 1)[1].splitlines()[0])


# ---------------------------------------------------------------- requeue that ends
def test_time_limit_within_the_usr1_lead_is_refused_at_start_instead_of_requeueing_forever(slurm, tmp_path):
    run_dir = slurm.root_tmp / "short"
    job = submit_stand_in(slurm, run_dir, stand_in_trainer(tmp_path), sbatch=("--time=1",))  # 60 s < USR1@600
    info = slurm.wait_state(job, DONE, timeout=90)
    out = out_of(run_dir, job)
    assert info["JobState"] == "FAILED" and info["Restarts"] == "0", out[-2000:]
    assert "time limit too short" in out and "] command: " not in out


def test_usr1_during_a_dry_run_stops_the_job_without_requeue(slurm, tmp_path):
    run_dir = slurm.root_tmp / "dryusr1"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "none", "--launch.train_mode", "dry_run"),
    )
    training(run_dir, job)
    scancel(slurm, "--signal=USR1", "--batch", job)
    info = slurm.wait_state(job, DONE, timeout=120)
    assert info["Restarts"] == "0" and "--launch.train_mode dry_run is not requeued" in out_of(run_dir, job), out_of(
        run_dir, job
    )


def test_restart_cap_stops_requeueing_even_after_a_good_checkpoint(slurm, tmp_path):
    run_dir = slurm.root_tmp / "cap"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "none", "--sbatch.max_restarts", "0"),
    )
    training(run_dir, job)
    scancel(slurm, "--signal=USR1", "--batch", job)
    info = slurm.wait_state(job, DONE, timeout=120)
    out = out_of(run_dir, job)
    assert "trainer saved:" in out and "requeue disabled (--sbatch.max_restarts 0" in out and "requeueing" not in out, (
        out[-2000:]
    )
    assert (info["JobState"], info["Restarts"]) == ("FAILED", "0")


def test_a_requeued_run_whose_checkpoint_did_not_advance_is_not_requeued_again(slurm, tmp_path):
    run_dir = slurm.root_tmp / "noadvance"
    job = submit_stand_in(slurm, run_dir, stand_in_trainer(tmp_path), "--ignore-requests", save_timeout=2)
    training(run_dir, job)
    scancel(slurm, "--signal=USR1", "--batch", job)  # first time: requeued (nothing to compare with)
    release_requeued(slurm, job)
    training(run_dir, job, run=1)
    scancel(slurm, "--signal=USR1", "--batch", job)  # second time: still no checkpoint -> stop
    info = slurm.wait_state(job, DONE, timeout=120, restarts=1)
    out = out_of(run_dir, job)
    assert (info["JobState"], info["Restarts"]) == ("FAILED", "1"), out[-2000:]
    assert "checkpoint did not advance" in out and out.count("requeueing job") == 1


def test_checkpoint_path_given_as_flag_equals_value_is_found_for_the_mark(slurm, tmp_path):
    run_dir = slurm.root_tmp / "ckpteq"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        ckpt_equals=True,
        script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "none", "--sbatch.max_restarts", "0"),
    )
    training(run_dir, job)
    scancel(slurm, "--signal=USR1", "--batch", job)
    slurm.wait_state(job, DONE, timeout=120)
    saved = json.loads((run_dir / "state" / "preempted.json").read_text())
    assert saved["latest_checkpoint"] == saved["saved"]["tag"], out_of(run_dir, job)[-2000:]  # not "none"


# ---------------------------------------------------------------- save time, SIGTERM
def test_save_wait_is_bounded_by_the_time_left_minus_cleanup(slurm, tmp_path):
    run_dir = slurm.root_tmp / "bounded"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        "--ignore-requests",
        save_timeout=300,
        sbatch=("--time=2",),
        script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "none", "--slurm.signal_seconds", "30"),
    )
    training(run_dir, job)
    scancel(slurm, "--signal=USR1", "--batch", job)
    wait_for(lambda: "waiting up to" in out_of(run_dir, job), 120, "the checkpoint request")
    scancel(slurm, job)
    waited = int(re.search(r"waiting up to (\d+)s", out_of(run_dir, job)).group(1))
    assert 0 <= waited <= 120 - 60  # a 2-minute job keeps its 60 s of cleanup: not the 300 s asked for


def test_default_save_wait_is_sized_from_the_model(slurm, tmp_path):
    run_dir = slurm.root_tmp / "sized"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        "--exit-at-once",
        "--actor.model_name_or_path",
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        save_timeout=None,
    )
    slurm.wait_state(job, DONE, timeout=120)
    assert "save timeout 344s" in out_of(run_dir, job), out_of(run_dir, job)[-2000:]  # 120 + 32 x 7


def test_sigterm_without_usr1_asks_the_trainer_for_a_checkpoint_within_the_grace_time(slurm, tmp_path):
    run_dir = slurm.root_tmp / "term"
    job = submit_stand_in(slurm, run_dir, stand_in_trainer(tmp_path))
    training(run_dir, job)
    scancel(slurm, "--signal=TERM", "--batch", job)
    slurm.wait_state(job, DONE, timeout=120)
    mark = json.loads((run_dir / "state" / "preempted.json").read_text())
    assert mark["signal"] == "TERM" and mark["saved"]["request"]["signal"] == "TERM", out_of(run_dir, job)[-2000:]
    assert mark["latest_checkpoint"] == mark["saved"]["tag"]


def test_a_job_preempted_with_a_grace_time_requeues_itself_when_its_steps_are_stopped_and_resumes(slurm, tmp_path):
    # PreemptMode=REQUEUE with GraceTime (tests/support/slurm_cluster.py): an `urgent` job that needs both nodes
    # preempts this one; Slurm sends SIGTERM to its steps at once (here the reward server; on a cluster also Ray, whose
    # workers exit on it) and would requeue only at the end of the grace time. The dead step must not fail the job
    # during the grace time: a FAILED job is never requeued.
    run_dir = slurm.root_tmp / "preempted"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "head", "--slurm.reward_workers", "1"),
    )
    training(run_dir, job)
    urgent = (
        subprocess.run(
            [
                which("sbatch"),
                "--parsable",
                "-p",
                "urgent",
                "--nodes=2",
                "--exclusive",
                f"--output={run_dir}/slurm/urgent-%j.out",
                "--wrap",
                "sleep 1",
            ],
            env=slurm.env,
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )
    release_requeued(slurm, job)
    info = slurm.wait_state(job, DONE, timeout=150, restarts=1)
    out = out_of(run_dir, job)
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1", (info, out[-3000:])
    assert slurm.job(urgent)["JobState"] == "COMPLETED"
    assert "is being preempted" in out and "step exited" not in out, out[-3000:]
    mark = json.loads((run_dir / "state" / "preempted.done.json").read_text())
    assert (mark["signal"], mark["run"]) == ("PREEMPT", 0)
    first, second = commands(out)
    assert second == [*first, "--ckpt.load_enable"]


# ---------------------------------------------------------------- resume only when meant
def stale_run(slurm, name: str) -> object:
    """A run directory left by another job: its preemption mark, W&B id and checkpoint."""
    run_dir = slurm.root_tmp / name
    (run_dir / "state").mkdir(parents=True)
    (run_dir / "ckpt" / "_actor").mkdir(parents=True)
    (run_dir / "ckpt" / "_actor" / "latest").write_text("global_step40")
    (run_dir / "state" / "preempted.json").write_text(
        json.dumps({"job": 999999, "run": 0, "signal": "TERM", "latest_checkpoint": "global_step40"}) + "\n"
    )
    (run_dir / "state" / "wandb_run_id").write_text("0ldw4ndbrun1d000\n")
    return run_dir


@pytest.fixture(scope="module")
def fresh_after_stale(slurm, tmp_path_factory):
    run_dir = stale_run(slurm, "stale")
    job = submit_stand_in(slurm, run_dir, stand_in_trainer(tmp_path_factory.mktemp("stale")), "--exit-at-once")
    info = slurm.wait_state(job, DONE, timeout=90)
    return run_dir, job, info, out_of(run_dir, job)


def test_a_fresh_submission_ignores_another_jobs_mark_and_starts_a_new_wandb_run(fresh_after_stale):
    run_dir, job, info, out = fresh_after_stale
    assert info["JobState"] == "COMPLETED", out[-2000:]
    assert "--ckpt.load_enable" not in commands(out)[0] and "mark of job 999999" in out
    assert re.search(r"W&B run id (\w+)", out).group(1) != "0ldw4ndbrun1d000"


def test_no_mark_is_left_to_resume_from_once_training_has_ended(fresh_after_stale):
    run_dir, job, info, out = fresh_after_stale
    assert info["JobState"] == "COMPLETED" and not (run_dir / "state" / "preempted.json").exists()


def test_explicit_resume_continues_the_checkpoint_and_the_wandb_run(slurm, tmp_path):
    run_dir = stale_run(slurm, "resume")
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "none", "--slurm.resume_enable"),
    )
    info = slurm.wait_state(job, DONE, timeout=90)
    out = out_of(run_dir, job)
    assert info["JobState"] == "COMPLETED" and commands(out)[0][-1] == "--ckpt.load_enable", out[-2000:]
    assert "stand-in trainer: resumed from global_step40" in train_log(run_dir, job)
    assert re.search(r"W&B run id (\w+)", out).group(1) == "0ldw4ndbrun1d000"


# ---------------------------------------------------------------- site options
@pytest.fixture(scope="module")
def site_job(slurm, tmp_path_factory):
    """Submitted by hand with no --time, a setup file, and a low soft open-files limit in the submitting shell
    (Slurm propagates the submitter's limits)."""
    tmp = tmp_path_factory.mktemp("site")
    setup = tmp / "site-setup.sh"
    setup.write_text("export SITE_SETUP_DONE=modules-loaded\n")
    run_dir = slurm.root_tmp / "site"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp),
        "--exit-at-once",
        script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "none", "--sbatch.setup", str(setup)),
        preexec_fn=lambda: resource.setrlimit(
            resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        ),
    )
    return slurm, run_dir, job


def test_setup_file_is_sourced_before_the_training_command(site_job):
    _, run_dir, job = site_job
    assert env_line(run_dir, job)["SITE_SETUP_DONE"] == "modules-loaded"


def test_open_files_soft_limit_is_raised_to_the_hard_limit(site_job):
    _, run_dir, job = site_job
    soft, hard = env_line(run_dir, job)["nofile"]
    assert soft == hard and soft > 256


def test_a_job_submitted_without_time_gets_a_default_limit_that_fits_common_partitions(site_job):
    slurm, _, job = site_job
    assert slurm.job(job)["TimeLimit"] == "1-00:00:00"


def test_multi_node_head_address_is_not_loopback(slurm, tmp_path):
    run_dir = slurm.root_tmp / "headip"
    job = submit_stand_in(slurm, run_dir, stand_in_trainer(tmp_path), "--exit-at-once", sbatch=("--nodes=2",))
    slurm.wait_state(job, DONE, timeout=90)
    head = re.search(r"head n1 \(([\d.]+)\)", out_of(run_dir, job))
    assert head and not head.group(1).startswith("127."), out_of(run_dir, job)[-2000:]


def test_head_ip_option_overrides_the_resolved_address(slurm, tmp_path):
    run_dir = slurm.root_tmp / "headip2"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        "--exit-at-once",
        sbatch=("--nodes=2",),
        script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "none", "--sbatch.head_ip", "10.9.8.7"),
    )
    slurm.wait_state(job, DONE, timeout=90)
    assert "head n1 (10.9.8.7)" in out_of(run_dir, job), out_of(run_dir, job)[-2000:]


def test_fewer_cpus_than_the_layout_needs_is_refused_before_ray_starts(slurm, tmp_path):
    # by hand, no CPU request: Slurm gives 1 CPU (bound by task/affinity) for 2 GPUs
    run_dir = slurm.root_tmp / "fewcpus"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        "--exit-at-once",
        sbatch=("--gpus-per-node=2",),
        script=("--slurm.reward_placement", "none"),
    )
    info = slurm.wait_state(job, DONE, timeout=90)
    out = out_of(run_dir, job)
    assert info["JobState"] == "FAILED" and "only 1 CPU(s) per node for a layout that needs 2" in out, out[-2000:]
    assert "ray-head" not in " ".join(p.name for p in (run_dir / "logs").rglob("*"))


def test_ray_ports_taken_on_the_head_are_refused_instead_of_joining_another_jobs_ray(slurm, tmp_path):
    # what a co-located job whose id agrees modulo 3000 would hold (here: a listener on the port the job is given)
    run_dir = slurm.root_tmp / "portbusy"
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        job = submit_stand_in(
            slurm,
            run_dir,
            stand_in_trainer(tmp_path),
            "--exit-at-once",
            script=("--slurm.reward_placement", "none", "--sbatch.ray_port", str(port)),
        )
        info = slurm.wait_state(job, DONE, timeout=90)
    out = out_of(run_dir, job)
    assert info["JobState"] == "FAILED" and f"port {port} on " in out and "is in use" in out, out[-2000:]
    assert "ray ready" not in out


def test_more_gpus_for_ray_than_slurm_gives_is_refused(slurm, tmp_path):
    run_dir = slurm.root_tmp / "fewgpus"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        "--exit-at-once",
        sbatch=("--gpus-per-node=1", "--cpus-per-task=2"),
        script=("--slurm.reward_placement", "none", "--slurm.gpus_per_node", "2"),
    )
    info = slurm.wait_state(job, DONE, timeout=90)
    out = out_of(run_dir, job)
    assert info["JobState"] == "FAILED" and "Slurm gives this job 1 GPU(s) per node" in out, out[-2000:]


def test_launch_refuses_a_time_limit_not_longer_than_the_usr1_lead(slurm, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lead_recipes.cli",
            "launch",
            "lead-1.5b",
            "--launch.target",
            "slurm",
            "--slurm.time",
            "00:10:00",
            "--slurm.signal_seconds",
            "600",
            "--no-launch.data_check_enable",
        ],
        capture_output=True,
        text=True,
        env={**slurm.env, "LEAD_RECIPES_RUN_DIR": str(tmp_path / "run")},
        timeout=120,
    )
    assert proc.returncode == 2 and "USR1 lead time" in proc.stderr and not (tmp_path / "run").exists()
