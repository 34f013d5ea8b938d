"""slurm/train.sbatch and slurm/eval.sbatch on the real Slurm of tests/slurm/conftest.py (two slurmd nodes on
this machine, 2 CPUs and 2 fake GPUs each, tasks bound to their cores), with Ray and reward servers running. Each job is
submitted once per module (a fixture: `launched`, `ray_probe`, `two_jobs`, `eval_array`, each saying what it runs)
and several tests check one property of it each. What these tests cannot show (real GPUs used by Ray workers, a
reward server answering a real trainer): docs/slurm.md#what-the-tests-cannot-show-on-one-machine."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from support.slurm_helpers import (
    DONE,
    ROOT,
    commands,
    expected_command,
    job_output,
    leftovers,
    out_of,
    scancel,
    stand_in_trainer,
    submit,
    submit_stand_in,
    train_log,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def health(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


# ---------------------------------------------------------------- through the launcher, recipe defaults
@pytest.fixture(scope="module")
def launched(slurm):
    """`lead-recipes launch --launch.target slurm` with the recipe's defaults: the real `lead-recipes train` in dry-run
    mode, 0 GPUs."""
    run_dir = slurm.root_tmp / "launched"
    job = submit(slurm, run_dir, "--slurm.nodes", "1")
    info = slurm.wait_state(job, DONE, timeout=360)
    return slurm, run_dir, job, info, job_output(run_dir, job)


def test_launched_job_brings_up_ray_then_its_reward_server_then_runs_the_resolved_command(launched):
    slurm, run_dir, job, info, out = launched
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", out[-3000:]
    port = 29000 + int(job) % 3000
    ready = out.find("ray ready: 1/1 nodes")
    healthy = out.find(f"reward server healthy: http://127.0.0.1:{port}/health (job {job})")
    assert 0 < ready < healthy < out.find("] command: "), out[-3000:]
    url = f"http://127.0.0.1:{port}/get_reward"
    assert commands(out) == [expected_command(run_dir, "--reward.remote_url", url, "--run.dry_run_enable")]
    log = (run_dir / "logs" / f"job-{job}-run0" / "train.log").read_text()
    assert url in log and '"method": "lead"' in log, log[-3000:]  # what `lead-recipes train` resolved


def test_launched_job_gets_the_whole_nodes_cpus_and_ray_registers_them(launched):
    slurm, run_dir, job, info, out = launched
    assert slurm.job(job)["NumCPUs"] == "2" and "0 GPU/2 CPU per node" in out
    assert re.search(r"ray ready: .* 2/\d+ CPUs", out), out[-3000:]


def test_launched_job_leaves_no_process_or_ray_directory(launched):
    slurm, run_dir, job, info, out = launched
    assert "cleanup done" in out and leftovers(slurm, job, 29000 + int(job) % 3000) == []
    assert not (slurm.root_tmp / f"ray-{job}").exists() and not Path(f"/tmp/ray-{job}").exists()


# ---------------------------------------------------------------- Ray from inside, long TMPDIR, USR1 to the steps
@pytest.fixture(scope="module")
def ray_probe(slurm, tmp_path_factory):
    """A job with one fake GPU, a TMPDIR too long for Ray's sockets, and a stand-in trainer that joins Ray from inside
    (an actor reads WANDB_RUN_ID), then waits while `scancel --signal=USR1` (steps, not the batch script) is sent, and
    checks Ray again; meanwhile the CPUs Ray's processes may run on are read from /proc."""
    run_dir = slurm.root_tmp / "probe"
    long_tmp = slurm.root_tmp / ("t" * 70)  # with <tmp>/ray-<job>/session_.../sockets/plasma_store: > 107 bytes
    long_tmp.mkdir()
    bin_dir = tmp_path_factory.mktemp("probe")
    # Slurm's srun ignores SLURM_CPUS_PER_TASK (the job's --cpus-per-task) since 22.05, but Debian's 22.05.8, here,
    # still reads it; with it unset and --exact (SLURM_EXACT, set by some sites), a step without -c gets one CPU.
    (bin_dir / "setup.sh").write_text("unset SLURM_CPUS_PER_TASK\nexport SLURM_EXACT=1\n")
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(bin_dir),
        "--ray-probe",
        sbatch=("--gpus-per-node=1", "--cpus-per-task=2", "--nodelist=n1"),
        script=(
            "--slurm.reward_placement",
            "none",
            "--slurm.gpus_per_node",
            "1",
            "--sbatch.setup",
            str(bin_dir / "setup.sh"),
        ),
        env={"TMPDIR": str(long_tmp)},
    )
    wait_for(
        lambda: "stand-in ray:" in train_log(run_dir, job) or slurm.job(job).get("JobState") in DONE,
        240,
        "the stand-in to reach Ray",
    )
    affinity = {}
    if "stand-in ray:" in train_log(run_dir, job):
        affinity = ray_affinity(job)
        scancel(slurm, "--signal=USR1", job)  # to the steps (no --batch): what a site's --signal=USR1@N does
        time.sleep(3)
        (run_dir / "probe-go").touch()
    info = slurm.wait_state(job, DONE, timeout=120)
    return slurm, run_dir, job, info, out_of(run_dir, job), train_log(run_dir, job), affinity


def cpu_set(text: str) -> set[int]:  # "0-1,4" -> {0, 1, 4}
    out = set()
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def ray_affinity(job: str) -> dict[str, set[int]]:
    """The CPUs each of this job's raylet and gcs_server processes may run on (Cpus_allowed_list in /proc)."""
    found = {}
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
    found = {}
    for line in ps:
        pid, _, args = line.strip().partition(" ")
        name = os.path.basename(args.split()[0]) if args else ""
        if name in ("raylet", "gcs_server") and f"/ray-{job}/" in args:
            status = Path(f"/proc/{pid}/status").read_text()
            found[name] = cpu_set(re.search(r"Cpus_allowed_list:\s*(\S+)", status).group(1))
    return found


def probe_result(log: str, key: str) -> dict:
    assert key in log, log[-3000:]
    return json.loads(log.split(key, 1)[1].splitlines()[0])


def test_ray_starts_when_tmpdir_is_too_long_for_its_sockets(ray_probe):
    slurm, run_dir, job, info, out, log, affinity = ray_probe
    assert f"ray temp dir /tmp/ray-{job}" in out and "ray ready: 1/1 nodes" in out, out[-3000:]
    assert probe_result(log, "stand-in ray: ")["resources"]["GPU"] == 1


def test_wandb_run_id_reaches_the_ray_actors(ray_probe):
    slurm, run_dir, job, info, out, log, affinity = ray_probe
    wandb_id = re.search(r"W&B run id (\w+)", out).group(1)
    assert probe_result(log, "stand-in ray: ")["actor_wandb_run_id"] == wandb_id


def test_ray_may_use_every_cpu_the_job_has_on_its_node_not_one_core(ray_probe):
    # a step without -c is one CPU, bound to one core by task/affinity: Ray and all it forks would share that core
    slurm, run_dir, job, info, out, log, affinity = ray_probe
    job_cpus = int(slurm.job(job)["NumCPUs"])  # the one node's: --cpus-per-task=2
    assert "raylet" in affinity and job_cpus == 2, (affinity, log[-2000:])
    for name, cpus in affinity.items():
        assert len(cpus) >= job_cpus, (name, cpus, job_cpus)


def test_usr1_sent_to_the_job_steps_leaves_ray_running(ray_probe):
    slurm, run_dir, job, info, out, log, affinity = ray_probe
    again = probe_result(log, "stand-in ray again: ")
    assert again["alive_nodes"] == 1 and again["actor_wandb_run_id"] and info["JobState"] == "COMPLETED", out[-3000:]


# ---------------------------------------------------------------- two jobs with reward servers on one node
@pytest.fixture(scope="module")
def two_jobs(slurm, tmp_path_factory):
    """Two jobs with reward servers on one node; one of their servers is then killed."""
    fake = stand_in_trainer(tmp_path_factory.mktemp("two"))
    jobs = []
    for name in ("serve-a", "serve-b"):
        run_dir = slurm.root_tmp / name
        job = submit_stand_in(
            slurm,
            run_dir,
            fake,
            sbatch=("--nodelist=n2",),
            script=("--no-sbatch.ray_enable", "--slurm.reward_placement", "head", "--slurm.reward_workers", "1"),
        )
        jobs.append((run_dir, job))
    for run_dir, job in jobs:
        wait_for(
            lambda run_dir=run_dir, job=job: (
                "] command: " in out_of(run_dir, job) or slurm.job(job).get("JobState") in DONE
            ),
            240,
            "the training step",
        )
    yield slurm, jobs
    for _, job in jobs:
        scancel(slurm, job)


def reward_url(out: str) -> str:
    cmd = commands(out)[0]
    return cmd[cmd.index("--reward.remote_url") + 1]


def test_two_jobs_on_one_node_each_grade_with_their_own_reward_server(two_jobs):
    slurm, jobs = two_jobs
    urls = [reward_url(out_of(run_dir, job)) for run_dir, job in jobs]
    assert urls[0] != urls[1]
    for (_run_dir, job), url in zip(jobs, urls):
        assert health(url.replace("/get_reward", "/health"))["job_id"] == job


def test_usr1_sent_to_the_job_steps_leaves_the_reward_server_running(two_jobs):
    slurm, jobs = two_jobs
    run_dir, job = jobs[0]
    scancel(slurm, "--signal=USR1", job)  # to the steps, not the batch script
    time.sleep(3)
    assert health(reward_url(out_of(run_dir, job)).replace("/get_reward", "/health"))["job_id"] == job
    assert slurm.job(job)["JobState"] == "RUNNING"


def test_a_reward_server_that_dies_during_training_stops_the_job_with_its_name(two_jobs):
    slurm, jobs = two_jobs
    run_dir, job = jobs[1]
    port = reward_url(out_of(run_dir, job)).split(":")[2].split("/")[0]
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
    # the server this job started (matched by its port and job id), not the srun/bash that launched it
    mine = f"serve --serve.host 0.0.0.0 --serve.port {port} --serve.job_id {job}"
    pids = [
        int(line.split()[0]) for line in ps if mine in line and " srun " not in f" {line} " and "bash -c" not in line
    ]
    assert pids, [line for line in ps if " serve " in line]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    info = slurm.wait_state(job, DONE, timeout=90)
    out = out_of(run_dir, job)
    assert info["JobState"] == "FAILED" and "the reward step exited" in out and "while training ran" in out, out[-2000:]


# ---------------------------------------------------------------- evaluation array
@pytest.fixture(scope="module")
def eval_array(slurm):
    """slurm/eval.sbatch --sbatch.submit_enable, with a checkpoint written after submission."""
    root = slurm.root_tmp / "evalruns"
    for run, step in (("a", 10), ("a", 20), ("b", 10)):
        (root / run / "ckpt" / f"global_step{step}_hf").mkdir(parents=True)
    out_dir = root / "out"
    sub = subprocess.run(
        [
            "bash",
            str(ROOT / "slurm/eval.sbatch"),
            "--sbatch.submit_enable",
            "--sbatch.checkpoints_glob",
            f"{root}/*/ckpt/global_step*_hf",
            "--data.benchmarks",
            "aime2024",
            "--output",
            str(out_dir),
            "--sbatch.array_throttle",
            "2",
            "--sbatch.dry_run_enable",
            "--slurm.sbatch_arg=--hold",
            f"--slurm.sbatch_arg=--output={out_dir}/%a.out",
            "--slurm.sbatch_arg",
            "--cpus-per-task=1",
            "--slurm.sbatch_arg=--mem=100M",
            "--",
            "--eval.preset",
            "sober",
        ],
        capture_output=True,
        text=True,
        env=slurm.env,
        cwd=root,
    )
    assert sub.returncode == 0, sub.stdout + sub.stderr
    job = sub.stdout.strip().split()[-1]
    (root / "a" / "ckpt" / "global_step5_hf").mkdir()  # written while the array waits: sorts first
    throttle = slurm.job(job).get("ArrayTaskThrottle")
    slurm.scontrol("release", job)
    files = [out_dir / f"{i}.out" for i in range(3)]
    wait_for(lambda: all(f.exists() and "dry run" in f.read_text() for f in files), 180, "the 3 array tasks")
    cmds = [shlex.split(f.read_text().split("] command: ", 1)[1].splitlines()[0]) for f in files]
    return root, throttle, cmds


def test_eval_array_evaluates_each_checkpoint_frozen_at_submission_exactly_once(eval_array):
    root, throttle, cmds = eval_array
    models = [c[c.index("--eval.model") + 1] for c in cmds]
    assert sorted(models) == sorted(str(p) for p in root.glob("[ab]/ckpt/global_step[12]0_hf"))


def test_eval_array_commands_are_valid_lead_recipes_eval_command_lines(eval_array):
    from evaluation.cli import build_parser

    root, throttle, cmds = eval_array
    assert [c[1] for c in cmds] == ["eval"] * 3
    assert [vars(build_parser().parse_args(c[2:]))["preset"] for c in cmds] == ["sober"] * 3


def test_eval_outputs_of_same_named_checkpoints_do_not_collide(eval_array):
    root, throttle, cmds = eval_array
    outs = [c[c.index("--output") + 1] for c in cmds]
    assert len(set(outs)) == 3 and all("global_step10_hf" in o or "global_step20_hf" in o for o in outs)


def test_eval_array_is_throttled(eval_array):
    root, throttle, cmds = eval_array
    assert throttle == "2"
