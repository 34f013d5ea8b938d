"""`lead-recipes launch`: the rendered train / sbatch / ray-job commands, overrides, refusal on a broken recipe or
a missing dataset, a real target-local run and a real `ray job submit` to a Ray head started here, both with the
training step in dry-run mode. (Submission to real Slurm is in test_slurm.py.)"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from support.ports import free_port

from lead_recipes.recipes import launch
from lead_recipes.recipes.recipe import load_recipe


def section(out: str, name: str) -> list[str]:
    lines = out.splitlines()
    return shlex.split(lines[lines.index(f"# {name}:") + 1])


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LEAD_RECIPES_RUN_DIR", str(tmp_path / "run"))


def test_dry_run_prints_the_train_command_of_the_recipe_with_overrides(capsys, tmp_path):
    assert launch.main(["lead-1.5b", "--run.dry_run_enable", "--set", "recipe.lead.aggregator=min_correct"]) == 0
    cmd = section(capsys.readouterr().out, "command")
    assert cmd == load_recipe("lead-1.5b", ["recipe.lead.aggregator=min_correct"]).command()
    assert cmd[cmd.index("--recipe.lead.aggregator") + 1] == "min_correct"
    assert not (tmp_path / "run").exists()  # nothing written, nothing started


def test_slurm_render_takes_resources_from_the_recipe_and_flags_override_them(capsys, tmp_path):
    assert (
        launch.main(
            [
                "lead-1.5b",
                "--launch.target",
                "slurm",
                "--run.dry_run_enable",
                "--slurm.nodes",
                "2",
                "--slurm.partition",
                "gpu",
                "--slurm.account",
                "acc",
                "--slurm.time",
                "01:00:00",
                "--set",
                "actor.num_nodes=2",
                "--set",
                "ref.num_nodes=2",
                "--set",
                "vllm.num_engines=8",
                "--set",
                "resources.nodes=2",
            ]
        )
        == 0
    )
    sub = section(capsys.readouterr().out, "submit")
    head, cmd = sub[: sub.index("--")], sub[sub.index("--") + 1 :]
    for opt in (
        "--nodes=2",
        "--partition=gpu",
        "--account=acc",
        "--time=01:00:00",
        "--gpus-per-node=4",
        "--requeue",
        "--signal=B:USR1@600",
        "--ntasks-per-node=1",
    ):
        assert opt in head, opt
    assert head[0] == "sbatch" and head[head.index(str(launch.SBATCH_SCRIPT)) + 1 :][:2] == [
        "--run.dir",
        str(tmp_path / "run"),
    ]
    assert (
        cmd[1:]
        == load_recipe(
            "lead-1.5b", ["actor.num_nodes=2", "ref.num_nodes=2", "vllm.num_engines=8", "resources.nodes=2"]
        ).command()[1:]
    )


def test_requeue_false_overrides_the_script_header_and_still_checkpoints_before_the_limit(capsys):
    # slurm/train.sbatch says `#SBATCH --requeue`: leaving the flag out would requeue anyway
    assert (
        launch.main(
            ["lead-1.5b", "--launch.target", "slurm", "--run.dry_run_enable", "--set", "resources.requeue=false"]
        )
        == 0
    )
    sub = section(capsys.readouterr().out, "submit")
    head = sub[: sub.index(str(launch.SBATCH_SCRIPT))]
    assert "--no-requeue" in head and "--requeue" not in head and "--signal=B:USR1@600" in head
    assert sub[sub.index("--sbatch.max_restarts") + 1] == "0"


def test_zero_gpus_renders_no_gpu_request_and_the_train_mode_goes_to_the_script(capsys):
    assert (
        launch.main(
            [
                "lead-1.5b",
                "--launch.target",
                "slurm",
                "--run.dry_run_enable",
                "--slurm.gpus_per_node",
                "0",
                "--launch.train_mode",
                "dry_run",
            ]
        )
        == 0
    )
    sub = section(capsys.readouterr().out, "submit")
    assert not [a for a in sub if a.startswith("--gpus-per-node=")]
    # the script takes the mode under the launch flag's name and appends the train flag itself
    assert sub[sub.index("--launch.train_mode") + 1] == "dry_run" and "--run.dry_run_enable" not in sub


@pytest.mark.parametrize("flags,waits", [([], True), (["--ray.wait_enable"], True), (["--no-ray.wait_enable"], False)])
def test_ray_address_renders_a_ray_job_submission_that_waits_unless_told(flags, waits, capsys):
    assert (
        launch.main(
            [
                "leash-1.5b",
                "--launch.target",
                "ray",
                "--ray.address",
                "http://10.0.0.1:8265",
                "--run.dry_run_enable",
                *flags,
            ]
        )
        == 0
    )
    sub = section(capsys.readouterr().out, "submit")
    assert sub[:5] == ["ray", "job", "submit", "--address", "http://10.0.0.1:8265"]
    assert ("--no-wait" not in sub) == waits
    assert sub[sub.index("--") + 1 :] == load_recipe("leash-1.5b").command()


@pytest.mark.parametrize(
    "argv",
    [
        ["--launch.target", "ray"],
        ["--ray.address", "http://10.0.0.1:8265"],
        ["--launch.target", "slurm", "--ray.address", "http://10.0.0.1:8265"],
    ],
)
def test_target_ray_and_a_ray_address_come_only_together(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        launch.main(["lead-1.5b", "--run.dry_run_enable", *argv])
    assert exit_.value.code == 2 and "--launch.target ray and --ray.address ADDR go together" in capsys.readouterr().err


def test_sft_recipe_renders_a_deepspeed_train_sft_command(capsys):
    assert launch.main(["grpo-lead-14b-sft", "--run.dry_run_enable"]) == 0
    assert section(capsys.readouterr().out, "command")[:3] == ["deepspeed", "--module", "openrlhf.cli.train_sft"]


def test_broken_override_exits_2_naming_the_key(capsys):
    assert launch.main(["lead-1.5b", "--run.dry_run_enable", "--set", "actor.adam.lrate=1"]) == 2
    assert "'actor.adam.lrate'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "recipe.lead.aggregatr=median_correct",
            "unknown key 'lead.aggregatr' in recipe; did you mean 'lead.aggregator'?",
        ),
        ("actor.adam.lrate=1", "unknown key 'actor.adam.lrate' in openrlhf; did you mean 'actor.adam.lr'"),
        ("recipe.lead.aggregator=median", "key 'lead.aggregator': 'median' is not one of"),
        ("resources.nodez=2", "unknown key 'nodez' in resources; did you mean 'nodes'?"),
    ],
)
def test_a_bad_override_blames_the_set_flag_not_the_recipe_file(override, message, capsys):
    """A typo in `--set recipe.lead.aggregatr=...` is the flag's error, not `.../lead-1.5b.yaml: unknown key ...`."""
    assert launch.main(["lead-1.5b", "--run.dry_run_enable", "--set", override]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lead-recipes launch: --set {override}: ") and message in err
    assert ".yaml" not in err


def test_missing_dataset_refuses_to_run_and_prints_the_data_command(capsys, tmp_path):
    assert launch.main(["lead-1.5b", "--launch.target", "local"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "data" / "math_l35_lead.jsonl") in err
    assert "lead-recipes data build --data.preset math-l35" in err


def test_a_missing_monitor_set_is_hinted_with_its_own_data_command(capsys, tmp_path):
    """Laser-D's eval dataset (its monitor set) is not the training file: each missing file's hint is the command
    whose --output it is (data.prepare_eval for eval.dataset), never the training set's."""
    assert launch.main(["laser-d-1.5b-l4096", "--launch.target", "local"]) == 2
    hints = {
        line.split(" = ")[0].split(": ")[1]: line.split("; build it with: ")[1]
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("# missing dataset: ")
    }
    monitor = str(tmp_path / "data" / "deepscaler_laser_monitor500.jsonl")
    assert set(hints) == {"data.prompt_dataset", "eval.dataset"}
    assert shlex.split(hints["eval.dataset"])[-2:] == ["--output", monitor]
    assert "--limit 500" in hints["eval.dataset"] and "--seed 1" in hints["eval.dataset"]
    assert shlex.split(hints["data.prompt_dataset"])[-1] == str(tmp_path / "data" / "deepscaler_laser.jsonl")


def test_a_chain_builds_the_monitor_set_with_the_training_set(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_RUNS", str(tmp_path / "runs"))
    assert launch.main(["laser-de-1.5b-l4096", "--launch.chain_enable", "--run.dry_run_enable"]) == 0
    lines = capsys.readouterr().out.splitlines()
    commands = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
    steps = [
        (line.split()[3], shlex.split(lines[next(j for j in commands if j > i)]))
        for i, line in enumerate(lines)
        if line.startswith("# step")
    ]
    assert [kind for kind, _ in steps] == ["data", "data", "train"]
    outputs = [c[c.index("--output") + 1] for kind, c in steps if kind == "data"]
    train = steps[-1][1]
    assert outputs == [train[train.index(flag) + 1] for flag in ("--data.prompt_dataset", "--eval.dataset")]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_local_launch_runs_the_real_train_command_in_dry_run_mode(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lead_recipes.cli",
            "launch",
            "lead-1.5b",
            "--launch.target",
            "local",
            "--launch.train_mode",
            "dry_run",
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"method": "lead"' in proc.stdout and "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B" in proc.stdout
    assert (tmp_path / "run" / "launch.json").exists()


@pytest.fixture(scope="module")
def ray_head():
    """A real Ray head with the job server (dashboard) on 127.0.0.1; stopped by PID afterwards."""
    tmp = tempfile.mkdtemp(prefix="lrj", dir="/tmp")  # short: Ray's socket paths live under it
    gcs, dash = free_port(), free_port()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    # Every port Ray would otherwise take at a fixed default (client server 10001, dashboard agent 52365) is a free
    # one: another Ray on the machine (a second test session, a user's cluster) must not make this head fail.
    log = Path(tmp) / "ray-start.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "ray"),
                "start",
                "--head",
                "--block",
                f"--port={gcs}",
                f"--dashboard-port={dash}",
                "--include-dashboard=true",
                "--node-ip-address=127.0.0.1",
                f"--ray-client-server-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
                "--num-cpus=1",
                "--num-gpus=0",
                f"--temp-dir={tmp}",
                "--disable-usage-stats",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    address = f"http://127.0.0.1:{dash}"
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(f"{address}/api/version", timeout=2)
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, (
                "Ray head with job server did not start:\n" + log.read_text()[-3000:]
            )
            time.sleep(1)
    yield address, env, tmp
    proc.terminate()
    proc.wait(timeout=60)
    left = [
        p
        for p in subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout.splitlines()
        if tmp in p and not p.startswith("Z")
    ]
    shutil.rmtree(tmp, ignore_errors=True)
    assert left == [], left


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ray_address_submits_a_real_ray_job_that_runs_the_train_command(ray_head, tmp_path):
    address, env, _ = ray_head
    env = {**env, "LEAD_RECIPES_RUN_DIR": str(tmp_path / "run"), "LEAD_RECIPES_DATA": str(tmp_path / "data")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lead_recipes.cli",
            "launch",
            "lead-1.5b",
            "--launch.target",
            "ray",
            "--ray.address",
            address,
            "--launch.train_mode",
            "dry_run",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "succeeded" in out and '"method": "lead"' in out  # the job ran `lead-recipes train --run.dry_run_enable`
    assert (tmp_path / "run" / "launch.json").exists()


def test_each_slurm_flag_of_launch_reaches_train_sbatch_under_its_own_name(capsys):
    # a launch flag and the train.sbatch option it becomes share one name (CONTRIBUTING.md: options of slurm/*.sbatch)
    values = {"--slurm.reward_workers": "3", "--slurm.reward_port": "29007", "--slurm.save_timeout": "77"}
    argv = ["lead-1.5b", "--launch.target", "slurm", "--run.dry_run_enable"]
    assert launch.main(argv + [a for kv in values.items() for a in kv]) == 0
    sub = section(capsys.readouterr().out, "submit")
    script_args = sub[sub.index(str(launch.SBATCH_SCRIPT)) :]
    for flag, value in values.items():
        assert script_args[script_args.index(flag) + 1] == value, flag


def test_the_printed_resources_are_the_ones_the_flags_resolve_to(capsys):
    argv = ["lead-1.5b", "--launch.target", "slurm", "--run.dry_run_enable", "--slurm.partition", "gpu"]
    argv += ["--slurm.time", "02:00:00", "--slurm.cpus_per_node", "16"]
    assert launch.main(argv) == 0
    import yaml

    out = capsys.readouterr().out
    printed = yaml.safe_load(out.split("\n# command:")[0].split("\n", 1)[1])["resources"]
    assert (printed["partition"], printed["time"], printed["cpus_per_node"]) == ("gpu", "02:00:00", 16)
    submit = section(out, "submit")
    assert {"--partition=gpu", "--time=02:00:00", "--cpus-per-task=16"} <= set(submit)


def test_dapo_overlong_flags_pass_through_a_recipe_into_a_train_command_that_accepts_them(capsys):
    from lead_recipes.training import cli as train

    sets = ["--set", "reward.overlong_buffer_len=1024", "--set", "reward.overlong_penalty_factor=0.5"]
    assert launch.main(["lead-1.5b", "--run.dry_run_enable", *sets]) == 0
    cmd = section(capsys.readouterr().out, "command")
    assert cmd[1] == "train" and cmd[cmd.index("--reward.overlong_buffer_len") + 1] == "1024.0"
    assert cmd[cmd.index("--reward.overlong_penalty_factor") + 1] == "0.5"
    assert train.main([*cmd[2:], "--run.dry_run_enable"]) == 0
    assert '"overlong_buffer_len": 1024.0' in capsys.readouterr().out
