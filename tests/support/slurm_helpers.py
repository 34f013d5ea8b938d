"""Shared pieces of the real-Slurm tests (tests/slurm/, whose conftest.py starts the cluster): the stand-in trainer
that replaces `lead-recipes train` inside jobs, and helpers to submit slurm/train.sbatch and read its logs. What the
tests cover and cannot show: docs/slurm.md."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from lead_recipes.recipes.recipe import load_recipe
from support.slurm_cluster import which

ROOT = Path(__file__).resolve().parents[2]
TRAIN_SBATCH = ROOT / "slurm" / "train.sbatch"
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
VENV_BIN = Path(sys.executable).parent


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def commands(out: str) -> list[list[str]]:
    return [shlex.split(line.split("] command: ", 1)[1]) for line in out.splitlines() if "] command: " in line]


def leftovers(slurm, job: str, port: int | None = None) -> list[str]:
    """Processes of this job still alive: anything under its Ray temp dir, or a reward server on its port. Only this
    cluster's (SLURM_CONF in their environment): job ids and derived ports repeat across test sessions."""
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,stat=,args="], capture_output=True, text=True).stdout.splitlines()
    ray_tmp = re.compile(rf"/ray-{job}(/|\s|$)")
    mine = f"SLURM_CONF={slurm.conf}".encode()
    found = []
    for line in ps:
        pid, stat, args = (line.split(None, 2) + ["", ""])[:3]
        if stat.startswith("Z") or not (
            ray_tmp.search(args) or (port and f"--serve.port {port} " in args and " serve " in args)
        ):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mine in f.read().split(b"\0"):
                    found.append(args)
        except OSError:
            continue
    return found


def scancel(slurm, *args: str) -> None:
    subprocess.run([which("scancel"), *args], env=slurm.env, check=True)


def release_requeued(slurm, job: str, restarts: int = 1) -> None:
    """After a requeue: wait until the job is pending again, then start it now (Slurm holds it with a BeginTime)."""
    slurm.wait_state(job, ("PENDING",), timeout=120, restarts=restarts)
    slurm.wait_idle(120)
    # slurmd revoked the old run's credential before its node went idle, and it rejects any credential of this job
    # id created in that same whole second or earlier (ctime <= revoked): "Killing non-startable batch job: Job
    # credential revoked", and the job ends FAILED. Slurm's own BeginTime hold avoids this; the test waits for the
    # next whole second instead.
    time.sleep(1.05 - time.time() % 1)
    slurm.scontrol("update", f"jobid={job}", "starttime=now")


# Stands in for `lead-recipes train` inside the job (the real trainer needs a GPU; `lead-recipes serve` passes
# through to the real command). It does not start Ray itself (see --ray-probe). It honours a checkpoint request as
# RecipeTrainer does (tests/training/test_openrlhf_plugin.py tests that one): same request path
# (lead_recipes.training.preemption.save_request_path), polled at each
# "step boundary"; on a request it writes the checkpoint tag, the saved marker, consumes the request and exits
# PREEMPTED_EXIT. It first prints what it sees of its environment ("stand-in env: {json}").
#   --ignore-requests  never answers a request (and does not stop on --ckpt.load_enable)
#   --exit-at-once     ends (0) right after the environment line
#   --ignore-term      ignores SIGTERM
#   --ray-probe        joins the job's Ray: cluster resources and the WANDB_RUN_ID inside an actor, then waits for
#                      <run dir>/probe-go and checks Ray again ("stand-in ray again: ...")
#   --ckpt.load_enable reports the resume ("resumed from <tag>") and ends, unless --ignore-requests
STAND_IN_TRAINER = """#!{python}
import json, os, resource, sys, time
if sys.argv[1:2] == ["serve"]:
    os.execv({real!r}, [{real!r}, *sys.argv[1:]])
from lead_recipes.training.preemption import PREEMPTED_EXIT, save_request_path, saved_marker_path, write_json_atomic
argv = sys.argv[2:]
ckpt = ([a.split("=", 1)[1] for a in argv if a.startswith("--ckpt.path=")] or [argv[argv.index("--ckpt.path") + 1]])[0]
latest = os.path.join(ckpt, "_actor", "latest")
env = {{k: os.environ.get(k) for k in ("WANDB_RUN_ID", "CUDA_VISIBLE_DEVICES", "SITE_SETUP_DONE", "RAY_ADDRESS")}}
env["nofile"] = list(resource.getrlimit(resource.RLIMIT_NOFILE))
print("stand-in env:", json.dumps(env), flush=True)
if "--exit-at-once" in argv:
    sys.exit(0)
if "--ignore-term" in argv:   # like a trainer stuck in a collective: only SIGKILL ends it
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if "--ray-probe" in argv:
    import ray
    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
    @ray.remote(num_cpus=1)
    class Probe:
        def env(self):
            return os.environ.get("WANDB_RUN_ID")
    probe = Probe.remote()
    print("stand-in ray:", json.dumps({{"resources": ray.cluster_resources(), "actor_wandb_run_id":
                                        ray.get(probe.env.remote())}}), flush=True)
    go = os.path.join(os.path.dirname(ckpt), "probe-go")
    while not os.path.exists(go):
        time.sleep(0.2)
    print("stand-in ray again:", json.dumps({{"actor_wandb_run_id": ray.get(probe.env.remote(), timeout=60),
                                              "alive_nodes": sum(n["Alive"] for n in ray.nodes())}}), flush=True)
    sys.exit(0)
if "--ckpt.load_enable" in argv and "--ignore-requests" not in argv:
    print("stand-in trainer: resumed from", open(latest).read() if os.path.exists(latest) else "none", flush=True)
    sys.exit(0)
request = save_request_path(ckpt)
for step in range(1, 2400):
    time.sleep(0.25)
    if os.path.exists(request) and "--ignore-requests" not in argv:
        os.makedirs(os.path.dirname(latest), exist_ok=True)
        with open(latest, "w") as f:
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
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "lead-recipes"  # the script recognises `lead-recipes train` by name
    fake.write_text(STAND_IN_TRAINER.format(python=sys.executable, real=str(VENV_BIN / "lead-recipes")))
    fake.chmod(0o755)
    return fake


def submit_stand_in(
    slurm,
    run_dir: Path,
    fake: Path,
    *train_args: str,
    sbatch: tuple[str, ...] = (),
    script: tuple[str, ...] = ("--no-sbatch.ray_enable", "--slurm.reward_placement", "none"),
    save_timeout: int | None = 60,
    env: dict | None = None,
    preexec_fn=None,
    ckpt_equals: bool = False,
) -> str:
    """sbatch train.sbatch by hand (no launcher) with the stand-in as the training command; output <run>/slurm/%j.out"""
    (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
    argv = [
        which("sbatch"),
        "--parsable",
        "--nodes=1",
        f"--output={run_dir}/slurm/%j.out",
        *sbatch,
        str(TRAIN_SBATCH),
        *script,
        "--run.dir",
        str(run_dir),
        *(["--slurm.save_timeout", str(save_timeout)] if save_timeout is not None else []),
        "--",
        str(fake),
        "train",
        *([f"--ckpt.path={run_dir / 'ckpt'}"] if ckpt_equals else ["--ckpt.path", str(run_dir / "ckpt")]),
        *train_args,
    ]
    out = subprocess.run(
        argv, env={**slurm.env, **(env or {})}, capture_output=True, text=True, cwd=run_dir, preexec_fn=preexec_fn
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def out_of(run_dir: Path, job: str) -> str:
    path = run_dir / "slurm" / f"{job}.out"
    return path.read_text() if path.exists() else ""


def train_log(run_dir: Path, job: str, run: int = 0) -> str:
    path = run_dir / "logs" / f"job-{job}-run{run}" / "train.log"
    return path.read_text() if path.exists() else ""


# ---------------------------------------------------------- through `lead-recipes launch --launch.target slurm`
def submit(slurm, run_dir: Path, *extra: str) -> str:
    env = {**slurm.env, "LEAD_RECIPES_RUN_DIR": str(run_dir), "LEAD_RECIPES_DATA": str(run_dir / "data")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lead_recipes.cli",
            "launch",
            "lead-1.5b",
            "--launch.target",
            "slurm",
            "--slurm.gpus_per_node",
            "0",
            "--launch.train_mode",
            "dry_run",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=run_dir.parent,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return (run_dir / "slurm" / "last_job_id").read_text().strip()


def job_output(run_dir: Path, job: str) -> str:
    return (run_dir / "slurm" / f"lead-1.5b-{job}.out").read_text()


def expected_command(run_dir: Path, *tail: str) -> list[str]:
    old = {k: os.environ.get(k) for k in ("LEAD_RECIPES_RUN_DIR", "LEAD_RECIPES_DATA")}
    os.environ.update(LEAD_RECIPES_RUN_DIR=str(run_dir), LEAD_RECIPES_DATA=str(run_dir / "data"))
    try:
        argv = load_recipe("lead-1.5b").command()[2:]  # what the launcher renders after `lead-recipes train`
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.update({k: v})
    return [str(Path(sys.executable).parent / "lead-recipes"), "train", *argv, *tail]
