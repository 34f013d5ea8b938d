"""The commands a recipe becomes: the `lead-recipes train` (or other entry point) command line, the `sbatch` and
`ray job submit` submissions around it, and the checks they need (time limits, node CPUs, missing local data).
Shared by `lead-recipes launch` and its `--launch.chain_enable`; it runs nothing but `sinfo`.
Docs: docs/launch.md, docs/slurm.md."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from lead_recipes.recipes.recipe import RecipeError


def lead_recipes_exe() -> str:
    """Absolute path of the `lead-recipes` console script of this interpreter (so batch jobs use the same venv)."""
    beside = Path(sys.executable).parent / "lead-recipes"
    return str(beside) if beside.exists() else (shutil.which("lead-recipes") or "lead-recipes")


def train_command(recipe, mode: str = "run", exe: str = "lead-recipes") -> list[str]:
    cmd = recipe.command()
    if recipe.entrypoint == "train":
        return [exe, *cmd[1:]] + {
            "run": [],
            "dry_run": ["--run.dry_run_enable"],
            "preflight": ["--preflight.only_enable"],
        }[mode]
    if exe != "lead-recipes" and (Path(exe).parent / cmd[0]).exists():  # e.g. the venv's deepspeed launcher
        cmd[0] = str(Path(exe).parent / cmd[0])
    return cmd


def missing_data(recipe) -> list[str]:
    """Local dataset paths named by the recipe that do not exist (HF hub ids are not checked here)."""
    out = []
    for key in ("data.prompt_dataset", "data.dataset", "eval.dataset"):
        value = recipe.openrlhf.get(key)
        for item in str(value).split(",") if value else []:
            if (item.startswith(("/", ".")) or item.endswith((".jsonl", ".json", ".parquet"))) and not Path(
                item
            ).exists():
                out.append(f"{key} = {item}")
    return out


PREPARE_KEYS = ("prepare", "prepare_eval")  # the recipe's data commands (recipe.DATA_KEYS)


def data_command(recipe, path: str) -> list[str] | None:
    """The `lead-recipes data` arguments that build `path`: `data.prepare` (the prompt dataset) or
    `data.prepare_eval` (the eval dataset, e.g. Laser-D's monitor set), whichever has `--output path`; None."""
    for key in PREPARE_KEYS:
        argv = [str(a) for a in recipe.data.get(key) or []]
        if "--output" in argv[:-1] and argv[argv.index("--output") + 1] == str(path):
            return argv
    return None


def slurm_seconds(limit: str) -> int | None:
    """Slurm's --time forms (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in seconds; None if unparsable."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", limit.strip())
    if not m:
        return None
    d, a, b, c = (int(x) if x else None for x in m.groups())
    if d is not None:  # D-H[:M[:S]]
        return ((d * 24 + a) * 60 + (b or 0)) * 60 + (c or 0)
    return a * 3600 + b * 60 + c if c is not None else (a * 60 + b if b is not None else a * 60)


CPUS_UNKNOWN = (
    "lead-recipes launch: warning: cannot determine CPUs per task (`sinfo` failed or listed no node here), so the job "
    "asks for no --cpus-per-task and may wait forever (docs/slurm.md); set --slurm.cpus_per_node N"
)


def node_cpus(partition: str | None) -> int | None:
    """CPUs of the smallest node of the partition (all nodes without one), from sinfo; None without Slurm."""
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%c", *(["-p", partition] if partition else [])],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    counts = [int(c) for c in out if c.isdigit()]
    return min(counts) if counts else None


def resources(recipe, args) -> dict:
    """The recipe's `resources:` with the --slurm.* flags given on top (what `launch` prints and submits)."""
    res = dict(recipe.resources)
    for key in (
        "nodes",
        "gpus_per_node",
        "cpus_per_node",
        "partition",
        "account",
        "time",
        "qos",
        "reward_placement",
        "reward_port",
        "reward_workers",
        "signal_seconds",
        "save_timeout",
    ):
        if getattr(args, key, None) is not None:
            res[key] = getattr(args, key)
    return res


def sbatch_command(recipe, args, run_dir: Path, cmd: list[str]) -> list[str]:
    res = resources(recipe, args)
    limit = slurm_seconds(str(res["time"]))
    if limit is not None and limit <= res["signal_seconds"]:
        raise RecipeError(
            f"resources.time {res['time']} is not longer than the USR1 lead time of "
            f"{res['signal_seconds']} s (resources.signal_seconds): the job would be signalled at start"
        )
    # No CPU request gives one CPU on many clusters, and OpenRLHF then waits forever for a CPU per GPU: ask for the
    # whole node's CPUs (the smallest node of the partition) unless the recipe says how many.
    if not res.get("cpus_per_node"):
        res["cpus_per_node"] = node_cpus(res.get("partition"))
        if not res["cpus_per_node"]:
            print(CPUS_UNKNOWN, file=sys.stderr)
    logs = run_dir / "slurm"
    sb = [
        "sbatch",
        "--parsable",
        f"--job-name={recipe.run_name}",
        f"--nodes={res['nodes']}",
        "--ntasks-per-node=1",
        f"--time={res['time']}",
        f"--output={logs}/%x-%j.out",
    ]
    # The script's header asks for --requeue: `requeue: false` must say --no-requeue (and --sbatch.max_restarts 0
    # below). USR1 still comes before the time limit, so the run ends on a checkpoint either way.
    sb += ["--requeue" if res["requeue"] else "--no-requeue", f"--signal=B:USR1@{res['signal_seconds']}"]
    if res["gpus_per_node"]:
        sb.append(f"--gpus-per-node={res['gpus_per_node']}")
    for key in ("partition", "account", "qos", "mem", "constraint"):
        if res.get(key):
            sb.append(f"--{key}={res[key]}")
    if res.get("cpus_per_node"):
        sb.append(f"--cpus-per-task={res['cpus_per_node']}")
    sb += list(args.sbatch_arg)
    # The script's options carry the names of the launch flags they come from (slurm/train.sbatch --help).
    sb += [
        args.sbatch_script,
        "--run.dir",
        str(run_dir),
        "--slurm.gpus_per_node",
        str(res["gpus_per_node"]),
        "--slurm.reward_placement",
        res["reward_placement"],
        "--launch.train_mode",
        args.train_mode,
        "--slurm.signal_seconds",
        str(res["signal_seconds"]),
    ]
    if res.get("reward_port"):
        sb += ["--slurm.reward_port", str(res["reward_port"])]
    if res.get("save_timeout") is not None:
        sb += ["--slurm.save_timeout", str(res["save_timeout"])]
    if args.resume:
        sb += ["--slurm.resume_enable"]
    if not res["requeue"]:
        sb += ["--sbatch.max_restarts", "0"]
    if res.get("cpus_per_node"):
        sb += ["--slurm.cpus_per_node", str(res["cpus_per_node"])]
    if res.get("reward_workers"):
        sb += ["--slurm.reward_workers", str(res["reward_workers"])]
    if recipe.entrypoint != "train":
        sb += ["--no-sbatch.ray_enable"]
    return sb + ["--", *cmd]


def ray_command(recipe, args, cmd: list[str]) -> list[str]:
    sub = [
        "ray",
        "job",
        "submit",
        "--address",
        args.ray_address,
        "--submission-id",
        f"{recipe.run_name}-{time.strftime('%Y%m%d-%H%M%S')}",
    ]
    if not args.wait:
        sub.append("--no-wait")
    return sub + ["--", *cmd]
